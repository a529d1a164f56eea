package atomicbucket_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
)

// twoWindows is a policy of two windows whose first (2 a second) empties
// long before its second (100 an hour).
var twoWindows = keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{
	{Rate: 2, Per: time.Second, Burst: 2},
	{Rate: 100, Per: time.Hour, Burst: 100},
}}

// newTwoWindows returns a store of twoWindows, its window 0 under
// algorithm alg, on clk.
func newTwoWindows(t *testing.T, alg keyrate.Algorithm, clk clock.Clock) *atomicbucket.Store {
	t.Helper()
	p := twoWindows
	p.Limits = []keyrate.Limit{p.Limits[0], p.Limits[1]}
	p.Limits[0].Algorithm = alg
	s, err := atomicbucket.New(keyrate.PerSecond(1), keyrate.WithClock(clk), keyrate.WithPolicies(p))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestWindowsDenyStateChangedAfterReading: Allow on a key of several
// windows reads window 0's word after its clock reading; a spend there of
// window 0's last token makes it a deny (read from the word, with no
// lock), and a refund there of an empty window 0 makes it an allow, as a
// store deciding under the lock after the same history answers. A store
// that read the word before the clock would admit both spends of the one
// token, or deny the refunded one. The HookClock runs the change at the
// request's reading, every run.
func TestWindowsDenyStateChangedAfterReading(t *testing.T) {
	spend := func(s *atomicbucket.Store) { s.Allow("k") }
	refund := func(s *atomicbucket.Store) { s.Refund("k", 1) }
	for _, c := range []struct {
		name   string
		before []func(*atomicbucket.Store)
		change func(*atomicbucket.Store)
		want   bool
	}{
		{"spent", []func(*atomicbucket.Store){spend}, spend, false},
		{"refunded", []func(*atomicbucket.Store){spend, spend}, refund, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := conformance.NewHookClock(time.Hour)
			s := newTwoWindows(t, keyrate.TokenBucket, clk)
			for _, f := range c.before {
				f(s)
			}
			clk.AtNextReading(func() { c.change(s) })
			got := s.Allow("k")
			if !clk.Fired() {
				t.Fatal("the change did not run at the request's reading: the interleaving was not driven")
			}
			ref := newTwoWindows(t, keyrate.TokenBucket, clock.NewManual(time.Hour))
			for _, f := range append(c.before, c.change) {
				f(ref)
			}
			if want := ref.Allow("k"); got != want || got != c.want {
				t.Fatalf("Allow after a change at its reading = %v; a store deciding under the lock says %v", got, want)
			}
			// The states agree after: the same Decision for the next request.
			d, _ := s.AllowN("k", 1)
			w, _ := ref.AllowN("k", 1)
			if d != w {
				t.Fatalf("next AllowN = %+v; want %+v", d, w)
			}
		})
	}
}
