package atomicbucket

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/casmap"
	"github.com/keyrate/keyrate/internal/rules"
)

// TestCarryIntoFullSegmentKeepsDebt (a bug an adversarial review found, fixed): a key whose
// policy changes used to be retired from its slot before its new slot was
// made (Store.locked, and Store.carry for RefundTier); when the segment
// could not take the new slot (its policy index full, or 2 GiB of arena),
// the key was dropped with its debt, and came back with a full bucket once
// the segment had room: on a frozen clock it admitted twice its burst. Now
// the new slot is prepared first (casmap.Map.Prepare), and a key the
// segment cannot take keeps its slot and its states; the call is refused
// as a full store's, and a refund under the other policy gives nothing
// back.
//
// The segment's policy index is filled directly, with keys under policies
// of their own, after lowering the limit to a few policies a segment
// (casmap.SetPolicyLimit: 65535 cost 85 s); the fillers are full and so
// are swept away afterwards, making room again.
func TestCarryIntoFullSegmentKeepsDebt(t *testing.T) {
	// fillersFull: the fillers' buckets are full, so the refusal path's
	// own sweep makes room and the move happens, with the debt; otherwise
	// they hold debt, nothing makes room, and the move is refused.
	for _, fillersFull := range []bool{true, false} {
		t.Run(fmt.Sprintf("fillersFull=%v", fillersFull), func(t *testing.T) { testCarryIntoFullSegment(t, fillersFull) })
	}
}

func testCarryIntoFullSegment(t *testing.T, fillersFull bool) {
	const limit = 4 // policies a segment: the default and three fillers'
	defer casmap.SetPolicyLimit(limit)()
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
	for i := 0; buddy == "" || len(fill) < limit-1; i++ {
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
	// Fill the index: keys each under a policy of its own, in full
	// buckets (a state of 0 is full at every reading) or empty ones.
	sg.Lock()
	for i, k := range fill {
		rs, err := rules.NewRules(keyrate.Policy{Name: fmt.Sprint("f", i), Limits: []keyrate.Limit{bucket}}, clk)
		if err != nil {
			t.Fatal(err)
		}
		st := []rules.State{0}
		if !fillersFull {
			rs.FullStates(clk.Now(), st)
			rs.Reserve(st, clk.Now(), burst, 0)
		}
		if !s.m.Insert(sg, k, s.m.Hash(k), rs, st) {
			sg.Unlock()
			t.Fatalf("filler %d refused", i)
		}
	}
	sg.Unlock()
	admitted := burst
	d, err := s.AllowTier(victim, other, 1)
	if d.Allowed {
		t.Fatalf("AllowTier moving the emptied victim = %+v, %v; want no admission", d, err)
	}
	if !fillersFull {
		// Nothing makes room: the call is refused, and the victim keeps
		// its slot and its debt under the default policy.
		if !errors.Is(err, keyrate.ErrStoreFull) {
			t.Fatalf("AllowTier moving the victim into a segment with no room: error %v, want one wrapping ErrStoreFull", err)
		}
		if err := s.RefundTier(victim, other, burst); !errors.Is(err, keyrate.ErrStoreFull) {
			t.Fatalf("RefundTier moving the victim into a segment with no room = %v; want an error wrapping ErrStoreFull", err)
		}
		if s.Allow(victim) {
			t.Fatal("the victim, refused a move, was admitted: its debt was lost")
		}
		if got := s.Len(); got != 2 { // the fillers went in past the store's count
			t.Fatalf("Len = %d after the refused move, want 2 (the buddy and the victim): the victim's slot must stay", got)
		}
		return
	}
	// The fillers are full: the refusal path's sweep removed them, and
	// the victim moved with its debt.
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
