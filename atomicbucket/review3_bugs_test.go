package atomicbucket

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/racetest"
	"github.com/keyrate/keyrate/internal/rules"
)

// TestReview3BugCarryIntoFullSegmentForgetsDebt (review3, bug 1): a key
// whose policy changes is retired from its slot before its new slot is
// made (Store.locked's `case ref.Found()`, and Store.carry for Refund);
// when the segment cannot take the new slot (casmap.Map.Insert reports
// false: 65535 policies in use in the segment, or 2 GiB of arena), the
// key is simply dropped, with its debt: "the key is gone: a full bucket
// next time". The call then fails with ErrStoreFull for a key the store
// held, and once the segment has room again the key comes back with a
// full bucket. On a frozen clock it admits twice its burst. mutexbucket,
// whose Replace carries the state over in one step, admits the burst.
//
// The segment's policy index is filled here directly, with keys under
// 65534 distinct policies (the only affordable way to get there: a test
// through the API alone needs as many policies in one segment), which are
// full and so are swept away afterwards, making room again. (65535 is
// casmap's maxPolicies: the index holds the default and 65534 more.)
func TestReview3BugCarryIntoFullSegmentForgetsDebt(t *testing.T) {
	if testing.Short() || racetest.Enabled {
		// 85 s without the race detector on the 2-core VM, 305 s with it.
		t.Skip("fills a segment's policy index: 65534 insertions, each copying the index; run it with go test -run TestReview3Bug ./atomicbucket/ (no -race, no -short)")
	}
	const burst = 5
	bucket := keyrate.Limit{Rate: 1, Per: time.Hour, Burst: burst}
	clk := clock.NewManual(time.Hour)
	s, err := New(bucket, keyrate.WithClock(clk), keyrate.WithPolicies(keyrate.Policy{Name: "other", Limits: []keyrate.Limit{bucket}}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, _ := s.Tier("other")
	const victim = "victim-key-0001"
	h := s.m.Hash(victim)
	sg := s.m.Segment(h)
	// Another key under the default policy in the victim's segment, so
	// that retiring the victim frees no index entry.
	var buddy string
	var fill []string
	for i := 0; buddy == "" || len(fill) < 1<<16-2; i++ {
		k := fmt.Sprint("filler-", i)
		if s.m.Segment(s.m.Hash(k)) != sg {
			continue
		}
		if buddy == "" {
			buddy = k
		} else {
			fill = append(fill, k)
		}
	}
	s.Allow(buddy)
	for range burst {
		if !s.Allow(victim) {
			t.Fatal("the victim's burst was denied")
		}
	}
	// Fill the index: keys in full buckets (a state of 0 is full at every
	// reading), each under a policy of its own.
	sg.Lock()
	for i, k := range fill {
		rs, err := rules.NewRules(keyrate.Policy{Name: fmt.Sprint("f", i), Limits: []keyrate.Limit{bucket}}, clk)
		if err != nil {
			t.Fatal(err)
		}
		if !s.m.Insert(sg, k, s.m.Hash(k), rs, []rules.State{0}) {
			sg.Unlock()
			t.Fatalf("filler %d refused", i)
		}
	}
	sg.Unlock()
	admitted := burst
	// The victim moves to "other": its slot is retired, and the new one
	// is refused.
	d, err := s.AllowTier(victim, other, 1)
	if err == nil && d.Allowed {
		admitted++
	}
	if errors.Is(err, keyrate.ErrStoreFull) {
		t.Logf("the move was refused: %v", err)
	}
	// The fillers are full: a sweep removes them, and the segment has
	// room again.
	s.Sweep()
	for range 2 * burst {
		if d, err := s.AllowTier(victim, other, 1); err == nil && d.Allowed {
			admitted++
		}
	}
	if admitted != burst {
		t.Fatalf("a key spent empty, then moved to another policy in a segment that could not take its new slot, "+
			"admitted %d on a frozen clock, want its burst %d: its debt was dropped with its slot", admitted, burst)
	}
}
