package hotshard

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
)

// TestGiveBackAfterClockStepsBack pins the documented exception for a
// clock that steps back (docs/design/hotkeys.md, docs/guides/contract.md):
// a batch whose tokens were all served at a late reading, then given back
// after the clock stepped back, returns the cover for the readings between
// (which the serves used), so the key admits at the serves' reading more
// than its Burst, but no more than one batch more (here a batch of 10
// against a Burst of 100). A give-back at the serves' own reading returns
// none of it (the check after the step forward proves the exception is
// the step's alone).
func TestGiveBackAfterClockStepsBack(t *testing.T) {
	const burst, batch = 100, 10
	run := func(stepBack bool) (atLate int) {
		g := newRig(t, keyrate.PerSecond(1000).WithBurst(burst), 2, time.Second, batch)
		start := time.Second
		g.clk.Set(start)
		if !g.call(0, 1) { // shard 0: a batch of 10 (9 left), a cover of 10ms
			t.Fatal("the first call was denied")
		}
		late := start + 9*time.Millisecond // within the batch's lifetime
		g.clk.Set(late)
		for range batch - 1 {
			if !g.call(0, 1) {
				t.Fatal("the batch did not serve its 9 tokens")
			}
		}
		if stepBack {
			g.clk.Set(start) // the clock steps back; the drain gives the batch back there
		}
		g.k.Drain()
		g.clk.Set(late)
		for i := 0; i < 2*burst && g.call(1, 1); i++ {
		}
		for _, a := range g.log {
			if a.at == g.r.Ticks(late) {
				atLate++
			}
		}
		return atLate
	}
	exact := run(false)
	t.Logf("at the late reading: %d admitted without a step back, %d with one", exact, run(true))
	if exact > burst {
		t.Fatalf("without a step back the key admitted %d at one reading, more than its Burst %d", exact, burst)
	}
	if got := run(true); got > burst+batch {
		t.Fatalf("after a step back the key admitted %d at one reading; the documented bound is Burst + one batch, %d", got, burst+batch)
	}
}
