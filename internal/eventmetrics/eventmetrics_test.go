package eventmetrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/eventmetrics"
)

// TestLabel: a label is valid UTF-8, at most MaxPolicyLabel bytes, cut at
// a rune's start, and a name that is already one is its own label.
func TestLabel(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"", ""},
		{"pro", "pro"},
		{"a\xffb", "a\uFFFDb"},
		{strings.Repeat("t", eventmetrics.MaxPolicyLabel), strings.Repeat("t", eventmetrics.MaxPolicyLabel)},
		{strings.Repeat("t", eventmetrics.MaxPolicyLabel+1), strings.Repeat("t", eventmetrics.MaxPolicyLabel-3) + "..."},
		// é is 2 bytes: byte 125 is the second byte of a rune, so the cut
		// moves back to 124.
		{strings.Repeat("é", 100), strings.Repeat("é", 62) + "..."},
		{"t" + strings.Repeat("é", 100), "t" + strings.Repeat("é", 62) + "..."},
	} {
		got := eventmetrics.Label(c.name)
		if got != c.want {
			t.Errorf("Label(%.20q...) = %.20q... (%d bytes), want %.20q... (%d bytes)", c.name, got, len(got), c.want, len(c.want))
		}
		if !utf8.ValidString(got) || len(got) > eventmetrics.MaxPolicyLabel {
			t.Errorf("Label(%.20q...) = %q: not UTF-8 or longer than MaxPolicyLabel", c.name, got)
		}
	}
}

// TestPoliciesBounds: names the store lacks take at most
// MaxUnknownPolicies labels, all names at most MaxPolicies, the rest
// share Other, and a relabelled name finds its label's *T.
func TestPoliciesBounds(t *testing.T) {
	made := map[string]int{}
	p := eventmetrics.New(func(label string) *string {
		made[label]++
		return &label
	})
	get := func(policy string, err error) string { return *p.Get(policy, err) }
	for i := range eventmetrics.MaxPolicies {
		want := fmt.Sprint("made-up-", i)
		if i >= eventmetrics.MaxUnknownPolicies {
			want = eventmetrics.Other
		}
		if got := get(fmt.Sprint("made-up-", i), fmt.Errorf("x: %w", keyrate.ErrUnknownPolicy)); got != want {
			t.Fatalf("unknown name %d: label %q, want %q", i, got, want)
		}
	}
	for i := range eventmetrics.MaxPolicies {
		want := fmt.Sprint("known-", i)
		if i >= eventmetrics.MaxPolicies-eventmetrics.MaxUnknownPolicies {
			want = eventmetrics.Other
		}
		if got := get(fmt.Sprint("known-", i), nil); got != want {
			t.Fatalf("known name %d: label %q, want %q", i, got, want)
		}
	}
	if got := get("made-up-0", keyrate.ErrUnknownPolicy); got != "made-up-0" {
		t.Errorf("a name seen before the bound keeps its label: got %q", got)
	}
	for label, n := range made {
		if n != 1 {
			t.Errorf("label %q made %d times, want once", label, n)
		}
	}
	if len(made) != eventmetrics.MaxPolicies+1 {
		t.Errorf("%d labels made, want MaxPolicies and Other", len(made))
	}
}

// TestPoliciesRelabelled: names with the same label share its *T, and
// Get of a seen name allocates nothing.
func TestPoliciesRelabelled(t *testing.T) {
	p := eventmetrics.New(func(label string) *string { return &label })
	a, b := p.Get("x\xff", nil), p.Get("x\xfe", nil)
	if a != b || *a != "x\uFFFD" {
		t.Errorf("Get(x\\xff) = %q, Get(x\\xfe) = %q: want one *T labelled x\\uFFFD", *a, *b)
	}
	p.Get("pro", nil)
	if n := testing.AllocsPerRun(100, func() { p.Get("pro", nil) }); n != 0 {
		t.Errorf("Get of a seen name: %v allocations, want 0", n)
	}
}

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("w: %w", keyrate.ErrStoreFull), "store_full"},
		{keyrate.ErrUnknownPolicy, "unknown_policy"},
		{keyrate.ErrInvalidCost, "invalid_cost"},
		{keyrate.ErrCostExceedsBurst, "invalid_cost"},
		{keyrate.ErrInvalidKey, "invalid_key"},
		{context.Canceled, "canceled"},
		{fmt.Errorf("redis: %w", context.DeadlineExceeded), "canceled"},
		{keyrate.ErrUnsupportedAlgorithm, "unsupported"},
		{errors.New("dial tcp: connection refused"), "backend"},
	} {
		if got := eventmetrics.KindOf(c.err).String(); got != c.want {
			t.Errorf("KindOf(%v) = %s, want %s", c.err, got, c.want)
		}
	}
	if got := eventmetrics.ErrorKind(-1).String(); got != "backend" {
		t.Errorf("ErrorKind(-1) = %s, want backend", got)
	}
}

type stats keyrate.Stats

func (s *stats) Stats() keyrate.Stats { return keyrate.Stats(*s) }

// TestWatch: totals count from Set on, carry over a switch, treat a
// restarted count as all new, and a typed nil is refused.
func TestWatch(t *testing.T) {
	var w eventmetrics.Watch
	if _, _, _, ok := w.Read(); ok {
		t.Fatal("the zero Watch reads a store")
	}
	read := func(keys int, evictions, refusals uint64) {
		t.Helper()
		k, e, r, ok := w.Read()
		if !ok || k != keys || e != evictions || r != refusals {
			t.Fatalf("Read() = %d, %d, %d, %v; want %d, %d, %d, true", k, e, r, ok, keys, evictions, refusals)
		}
	}
	a := &stats{Keys: 3, Evictions: 10, Refused: 5}
	if err := w.Set(a); err != nil {
		t.Fatal(err)
	}
	read(3, 0, 0)
	a.Evictions, a.Refused = 12, 6
	read(3, 2, 1)
	a.Evictions = 1 // restarted: all new
	read(3, 3, 1)
	var typedNil *stats
	if err := w.Set(typedNil); err == nil || !strings.Contains(err.Error(), "*eventmetrics_test.stats") {
		t.Errorf("Set(typed nil) = %v, want an error naming the type", err)
	}
	read(3, 3, 1)
	a.Evictions = 4 // read at the switch
	if err := w.Set(&stats{Keys: 1}); err != nil {
		t.Fatal(err)
	}
	read(1, 6, 1)
	if err := w.Set(nil); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := w.Read(); ok {
		t.Error("Set(nil) still reads a store")
	}
}

// TestDocumentedValues: keyrateprom's and keyrateotel's docs state these
// values.
func TestDocumentedValues(t *testing.T) {
	if eventmetrics.MaxPolicies != 64 || eventmetrics.MaxUnknownPolicies != 32 || eventmetrics.MaxPolicyLabel != 128 || eventmetrics.Other != "other" {
		t.Error("the bounds changed: update keyrateprom's and keyrateotel's docs, and this test")
	}
}
