package hotshard

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
)

// hookClock is a manual clock that runs a function right after its next
// reading, on the goroutine that took it (as conformance.HookClock).
type hookClock struct {
	*clock.Manual
	hook atomic.Pointer[func()]
}

func (c *hookClock) Now() time.Duration {
	v := c.Manual.Now()
	if f := c.hook.Swap(nil); f != nil {
		(*f)()
	}
	return v
}

// TestDenyWhileGivingBack: a call that finds the word empty while another
// goroutine's drain is giving a batch back (between its swap of the shard
// and its swap of the word) must not deny: the shard stays claimed until
// the tokens are back, its own drain finds it, and it tries the word
// again. A drain that emptied the shard before giving back would let it
// deny with the batch's tokens on their way back, and the key would admit
// fewer than Burst with the clock stopped. The hook clock stops the drain
// right after its reading, every run.
func TestDenyWhileGivingBack(t *testing.T) {
	clk := &hookClock{Manual: clock.NewManual(time.Hour)}
	rs, err := rules.NewRules(keyrate.Policy{Name: "p", Limits: []keyrate.Limit{keyrate.PerSecond(1000).WithBurst(100)}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	g := &rig{rs: rs, r: rs.Rule(0), k: NewKey(2, time.Second)}
	g.k.fixed = 3
	if !g.call(0, 1) { // shard 0: a batch of 3 (2 left) and a cover of 3
		t.Fatal("the first call was denied")
	}
	if w := g.k.shards[0].word.Load(); w&countMask != 2 || w&liveBit == 0 {
		t.Fatalf("shard 0 holds %#x, want a live batch of 2", w)
	}
	now := g.r.Now()
	old := g.slot.Load()
	if !g.slot.CompareAndSwap(old, g.r.Encode(0, now)) { // the word empty
		t.Fatal("emptying the word failed")
	}

	retried := make(chan struct{}, 1)
	testHookRetry = func() {
		select {
		case retried <- struct{}{}:
		default:
		}
	}
	defer func() { testHookRetry = nil }()
	var allowed atomic.Bool
	done := make(chan struct{})
	var early atomic.Bool
	hook := func() { // in the drain's give-back, after its reading
		go func() {
			defer close(done)
			allowed.Store(g.k.serveAt(1, g.rs, now, 1) || func() bool {
				_, ok := g.k.Take(g.rs, &g.slot, now, 1, 1)
				return ok
			}())
		}()
		select {
		case <-retried: // the call saw the shard claimed and will try again
		case <-done:
			early.Store(true) // it decided while the tokens were on their way
		}
	}
	clk.hook.Store(&hook)
	g.k.Drain()
	<-done
	if early.Load() || !allowed.Load() {
		t.Fatalf("a call during a drain's give-back was decided early (%v) or denied (allowed %v), with 5 tokens coming back", early.Load(), allowed.Load())
	}
}

// TestDenyAfterGiveBackDuringDrain: a call whose spend from the word is
// denied while another goroutine's drain is giving a batch back, and whose
// own drain then finds every shard empty (that give-back finished in
// between: its tokens are in the word now, after the spend read it), must
// not deny: the word holds 5 tokens when the call's drain pass ends, and a
// plain key would allow it. The hook runs the other drain, whole, right
// after the call's spend is denied, every run; TestDenyWhileGivingBack
// catches the same window only when the scheduler lands in it.
func TestDenyAfterGiveBackDuringDrain(t *testing.T) {
	clk := clock.NewManual(time.Hour)
	rs, err := rules.NewRules(keyrate.Policy{Name: "p", Limits: []keyrate.Limit{keyrate.PerSecond(1000).WithBurst(100)}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	g := &rig{rs: rs, r: rs.Rule(0), k: NewKey(2, time.Second)}
	g.k.fixed = 3
	if !g.call(0, 1) { // shard 0: a batch of 3 (2 left) and a cover of 3
		t.Fatal("the first call was denied")
	}
	now := g.r.Now()
	old := g.slot.Load()
	if !g.slot.CompareAndSwap(old, g.r.Encode(0, now)) { // the word empty
		t.Fatal("emptying the word failed")
	}
	once := false
	testHookDenied = func() {
		if !once {
			once = true
			g.k.Drain() // another goroutine's drain, from its claim to its release
		}
	}
	defer func() { testHookDenied = nil }()
	if _, ok := g.k.Take(g.rs, &g.slot, now, 1, 1); !ok {
		t.Fatal("a call was denied with 5 tokens back in the word before its drain pass found every shard empty")
	}
}
