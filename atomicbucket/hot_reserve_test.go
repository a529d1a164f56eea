package atomicbucket_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/internal/conformance"
)

// TestHotGiveBackUnderReservation: a batch taken between a reservation's
// drain of the key's shards and its spend from the word, and given back
// while the reservation is pending, must not move the reservation's slot
// for other calls. The reservation of the whole burst waits for the
// tokens and cover the batch holds; giving those back moves the word
// back, so calls at the slot would find them on top of the reserved
// burst: 1029 admitted at one reading against a Burst of 1000 (1015, the
// cover alone, when this goroutine's shard is the other's and it serves
// the batch's tokens itself before the slot). A bucket
// owing more than its Burst gains nothing from a refund
// (rules.Rule.Refund), and so from a give-back. The hook clock runs the
// other goroutine's call at the reservation's reading, every run.
func TestHotGiveBackUnderReservation(t *testing.T) {
	const burst = 1000
	clk := conformance.NewHookClock(time.Hour)
	s, err := atomicbucket.New(keyrate.PerSecond(1_000_000).WithBurst(burst), // a batch of 15, cover 15
		keyrate.WithClock(clk), atomicbucket.WithHotKeys("hot"), atomicbucket.WithHotShards(16, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Allow("hot") { // inserts the key: no batch yet
		t.Fatal("the first call was denied")
	}
	other := func() { // another goroutine (another shard) takes a batch
		done := make(chan bool)
		go func() { done <- s.Allow("hot") }()
		if !<-done {
			t.Error("the other goroutine's call was denied")
		}
	}
	clk.AtNextReading(other)
	r, err := s.Reserve("hot", burst, time.Second)
	if err != nil || !r.OK() {
		t.Fatalf("Reserve(%d) = %+v, %v", burst, r, err)
	}
	if d := s.Peek("hot"); d.Remaining != 0 {
		t.Fatalf("after the reservation Peek = %+v, want none left", d)
	}
	// Calls now are served only from the other goroutine's batch, taken
	// before the reservation, if this goroutine's shard is its shard (it
	// depends on their stacks); the denial drains the shards, and must not
	// give back into the word what the reservation waits for.
	for i := 0; i <= burst && s.Allow("hot"); i++ {
	}
	clk.Advance(r.Delay()) // the reservation's slot: its holder proceeds with the burst
	n := 0
	for ; n <= burst && s.Allow("hot"); n++ {
	}
	if n != 0 {
		t.Fatalf("at the slot of a reservation of the whole burst (%v), %d more calls were admitted: %d at one reading, Burst %d",
			r.Delay(), n, burst+n, burst)
	}
}
