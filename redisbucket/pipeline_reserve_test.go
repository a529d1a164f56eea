package redisbucket_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/redisbucket"
)

// TestPipelinedReservations: reservations and their cancels, made by
// goroutines of two stores (two processes) through pipelines (one turn,
// pipelines of up to 4) beside a deny cache, on a clock that moves
// forward between rounds, keep the token bucket's bound: the
// reservations left standing never hold more than Burst + Rate·T/Per
// over any interval. Pipelining changes only how the script calls are
// sent, so a reply or a cancel's answer given to the wrong caller would
// show here.
func TestPipelinedReservations(t *testing.T) {
	srv := server(t)
	limit := keyrate.PerSecond(1000).WithBurst(20)
	clk := clock.NewManual(unixStart)
	prefix := uniquePrefix(t)
	var stores [2]*redisbucket.Store
	hook := newGateHook() // armed never: it counts the pipelines
	for i := range stores {
		c := newClient(t, srv.Addr())
		c.AddHook(hook)
		stores[i] = mustNew(t, c, limit, redisbucket.WithTimeSource(clk),
			redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout), redisbucket.WithDenyCache(64),
			redisbucket.WithPipelining(redisbucket.Pipelining{InFlight: 1, MaxBatch: 4}))
	}
	const goroutines, rounds, ops = 8, 6, 30
	var kept []conformance.Admission
	rng := rand.New(rand.NewPCG(5, 6))
	for range rounds {
		kept = append(kept, conformance.ReserveAndCancel(t, []keyrate.WaitLimiter{stores[0], stores[1]}, limit, goroutines, ops, rng.Uint64())...)
		clk.Advance(time.Duration(rng.IntN(50_000)) * time.Microsecond)
	}
	total := 0
	for _, a := range kept {
		total += a.Cost
	}
	conformance.CheckBound(t, limit, kept)
	if total < limit.Burst {
		t.Fatalf("the reservations kept hold %d tokens, fewer than one burst: nothing was tested", total)
	}
	if len(hook.pipelines()) == 0 {
		t.Error("no pipeline was sent: the test tests nothing")
	}
	for _, s := range stores {
		if q, f := redisbucket.Pipelined(s); q != 0 || f != 0 {
			t.Errorf("after the calls, %d queued and %d in flight; want none", q, f)
		}
	}
}
