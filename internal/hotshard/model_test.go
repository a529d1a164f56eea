package hotshard

import (
	"cmp"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/casmap"
	"github.com/keyrate/keyrate/internal/layout"
	"github.com/keyrate/keyrate/internal/racetest"
	"github.com/keyrate/keyrate/internal/rules"
)

// rig is one hot key: its rules under a manual clock, its word (a
// casmap.Slot, full at first) and its shards.
type rig struct {
	rs   *rules.Rules
	r    *rules.Rule
	clk  *clock.Manual
	slot casmap.Slot
	k    *Key
	log  []admission // every admission, in order
}

// admission is cost tokens admitted at tick at.
type admission struct {
	at   uint64
	cost int
}

func newRig(t testing.TB, l keyrate.Limit, shards int, lifetime time.Duration, fixed int) *rig {
	t.Helper()
	clk := clock.NewManual(0)
	rs, err := rules.NewRules(keyrate.Policy{Name: "p", Limits: []keyrate.Limit{l}}, clk)
	if err != nil {
		t.Fatal(err)
	}
	g := &rig{rs: rs, r: rs.Rule(0), clk: clk, k: NewKey(shards, lifetime)}
	g.k.fixed = fixed
	return g
}

// call is one request of cost on shard i at the clock's reading, as a
// store makes it: Serve, then Take. It logs an admission and reports it.
func (g *rig) call(i uint32, cost int) bool {
	now := g.r.Now()
	ok := g.k.serveAt(i&g.k.mask, g.rs, now, cost)
	if !ok {
		_, ok = g.k.Take(g.rs, &g.slot, now, cost, i)
	}
	if ok {
		g.log = append(g.log, admission{now, cost})
	}
	return ok
}

// check fails t if some interval [a, b] of readings holds admissions of
// more than the exact token bucket allows: Σcost·I ≤ F + (b − a), in
// ticks, which is admitted ≤ Burst + Rate·(b−a)/Per. It checks every pair
// of admission readings, an independent statement of the bound.
func (g *rig) check(t testing.TB) {
	t.Helper()
	in, fill := g.r.Interval(), g.r.FillTicks()
	log := slices.Clone(g.log) // in reading order: the bound is over readings
	slices.SortStableFunc(log, func(x, y admission) int { return cmp.Compare(x.at, y.at) })
	for i := range log {
		sum := uint64(0)
		for j := i; j < len(log); j++ {
			sum += uint64(log[j].cost)
			if j+1 < len(log) && log[j+1].at == log[j].at {
				continue // every admission at log[j]'s reading first
			}
			if span := log[j].at - log[i].at; sum*in > fill+span {
				t.Fatalf("admitted %d tokens at readings in [%d, %d] ticks: more than Burst %d + %d ticks at %d ticks a token",
					sum, log[i].at, log[j].at, g.r.Limit().Burst, span, in)
			}
		}
	}
}

// drive runs ops, a byte stream, on g: each op is a request on a shard,
// a clock step, a drain, or a long idle that lets batches expire.
func (g *rig) drive(ops []byte) {
	for len(ops) >= 2 {
		op, arg := ops[0], ops[1]
		ops = ops[2:]
		switch op % 8 {
		case 0, 1, 2, 3: // a request, cost 1..3
			g.call(uint32(arg), 1+int(op/8)%3)
		case 4: // a small step: a fraction of a token
			g.clk.Advance(time.Duration(arg) * time.Millisecond)
		case 5: // a step of up to a lifetime and more
			g.clk.Advance(time.Duration(arg) * 20 * time.Millisecond)
		case 6:
			g.k.Drain()
		case 7: // a run of requests on one shard, at one reading
			for range arg % 16 {
				g.call(uint32(arg>>4), 1)
			}
		}
	}
}

// modelLimits are the limits the model check drives: fast enough that a
// lifetime holds several tokens.
var modelLimits = []struct {
	l        keyrate.Limit
	shards   int
	lifetime time.Duration
	fixed    int
}{
	{keyrate.PerSecond(100).WithBurst(40), 2, 100 * time.Millisecond, 0},
	{keyrate.PerSecond(100).WithBurst(40), 4, time.Second, 3},
	{keyrate.PerSecond(1000).WithBurst(64), 4, 10 * time.Millisecond, 0},
	{keyrate.PerSecond(7).WithBurst(50), 2, 2 * time.Second, 5},
	{keyrate.PerSecond(100).WithBurst(20), 8, 50 * time.Millisecond, 2},
}

// TestModel: seeded random interleavings of requests on every shard, clock
// steps, drains and expiries never admit more than the exact token bucket
// over any interval. A shard that served a batch past its lifetime, or a
// batch charged without its cover, or a give-back of more than the batch
// left, fails it.
func TestModel(t *testing.T) {
	seeds := uint64(40)
	if racetest.Enabled {
		seeds = 8 // the model is single-goroutine: the race detector adds nothing
	}
	for ci, c := range modelLimits {
		for seed := range seeds {
			g := newRig(t, c.l, c.shards, c.lifetime, c.fixed)
			rng := rand.New(rand.NewPCG(seed, uint64(ci)))
			ops := make([]byte, 1200)
			for i := range ops {
				ops[i] = byte(rng.Uint32())
			}
			g.drive(ops)
			g.check(t)
			if len(g.log) == 0 {
				t.Fatalf("limit %d seed %d: nothing admitted", ci, seed)
			}
		}
	}
}

// FuzzModel is TestModel's check over inputs the fuzzer picks: the limit
// and the shards from the first bytes, then the ops.
func FuzzModel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 0, 0, 1, 0, 5, 9, 0, 1, 7, 0x3f, 6, 0, 0, 0})
	f.Add([]byte{3, 2, 1, 7, 0xff, 5, 200, 7, 0xff, 0, 1, 0, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		c := modelLimits[int(data[0])%len(modelLimits)]
		fixed := int(data[1] % 8) // 0: Params' batch
		lifetime := time.Duration(1+binary.LittleEndian.Uint16(data[2:4])%2000) * time.Millisecond
		g := newRig(t, c.l, c.shards, lifetime, fixed)
		g.drive(data[4:])
		g.check(t)
	})
}

// TestTenSeconds is the lead's example: burst 10 at 1/s; shard A takes a
// batch at t=0, the bucket is full again by t=10, shard B takes a batch
// then, and A tries to serve its batch at t=10. Without the lifetime A
// would serve its leftover at t=10 as well (10 + 3 at one instant); without
// the cover the give-backs of the drain would return more than was
// charged. At t=10 the key admits exactly its burst, 10.
func TestTenSeconds(t *testing.T) {
	g := newRig(t, keyrate.PerSecond(1).WithBurst(10), 2, time.Second, 4)
	if !g.call(0, 1) { // A: a batch of 4 and a cover of 1s, serving 1
		t.Fatal("the first call was denied")
	}
	if w := g.k.shards[0].word.Load(); w&countMask != 3 || w&liveBit == 0 {
		t.Fatalf("shard A holds %d (word %#x), want a live batch of 3", w&countMask, w)
	}
	if d := g.r.Peek(g.slot.Load(), g.r.Now()); d.Remaining != 5 {
		t.Fatalf("the word holds %d after A's batch, want 10 − 4 − 1 = 5", d.Remaining)
	}
	g.clk.Advance(10 * time.Second)
	n := 0
	if g.call(1, 1) { // B: a batch at t=10
		n++
	}
	for range 30 { // A first: its batch expired at t=1s
		if g.call(0, 1) {
			n++
		}
	}
	for i := range 30 {
		if g.call(uint32(i), 1) {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("admitted %d at t=10s, want exactly the burst, 10", n)
	}
	g.check(t)
}

// TestFrozenExact: with the clock stopped, calls over every shard admit
// exactly Burst, though batches took cover: a denial drains the shards and
// gets their unused tokens and cover back first.
func TestFrozenExact(t *testing.T) {
	for _, fixed := range []int{0, 1, 3, 7} {
		g := newRig(t, keyrate.PerSecond(1000).WithBurst(100), 4, time.Second, fixed)
		g.clk.Advance(time.Hour)
		n := 0
		for i := range 500 {
			if g.call(uint32(i*7), 1) {
				n++
			}
		}
		if n != 100 {
			t.Fatalf("batch %d: admitted %d with the clock stopped, want exactly 100", fixed, n)
		}
	}
}

// TestShardLayout: a shard is exactly one cache line, so that two never
// share one.
func TestShardLayout(t *testing.T) {
	if got := unsafe.Sizeof(shard{}); got != layout.CacheLine {
		t.Fatalf("a shard is %d bytes, want %d", got, layout.CacheLine)
	}
}

// TestParams: a slow key and a small burst get no shards; a fast key's
// batch is what its rate refills in the lifetime, capped at Burst/(4n),
// and its cover is at most the batch.
func TestParams(t *testing.T) {
	for _, c := range []struct {
		l         keyrate.Limit
		shards    int
		b         int
		coverToks uint64
	}{
		{keyrate.PerSecond(100).WithBurst(1000), 4, 0, 0},                   // under a token a ms
		{keyrate.PerSecond(1_000_000).WithBurst(1_000_000), 16, 1000, 1000}, // 1000 a ms
		{keyrate.PerSecond(1_000_000).WithBurst(6400), 16, 100, 100},        // capped by the burst
		{keyrate.PerSecond(1_000_000).WithBurst(63), 16, 0, 0},              // a burst under 4n
	} {
		g := newRig(t, c.l, c.shards, 0, 0)
		b, cover := g.k.Params(g.r)
		if b != c.b || cover/g.r.Interval() != c.coverToks {
			t.Errorf("%v over %d shards: batch %d, cover %d tokens; want %d, %d", c.l, c.shards, b, cover/g.r.Interval(), c.b, c.coverToks)
		}
	}
}

// TestStaleServe: a call whose reading predates the batch it finds (it
// read the clock, then was descheduled while the burst was spent at that
// reading and a batch was taken later) does not serve from that batch.
// Served, its token would be the burst's plus one at that reading.
func TestStaleServe(t *testing.T) {
	g := newRig(t, keyrate.PerSecond(1000).WithBurst(100), 2, time.Second, 3)
	g.clk.Advance(5 * time.Second)
	stale := g.r.Now()
	n := 0
	for range 200 { // the whole burst at the stale reading
		if g.call(1, 1) {
			n++
		}
	}
	if n != 100 {
		t.Fatalf("admitted %d at one reading, want the burst, 100", n)
	}
	g.clk.Advance(60 * time.Millisecond) // 60 tokens back: enough for a batch above half the burst
	if !g.call(0, 1) {
		t.Fatal("the call after 60ms was denied")
	}
	if w := g.k.shards[0].word.Load(); w&liveBit == 0 || w&countMask != 2 {
		t.Fatalf("shard 0 holds %#x, want a live batch of 2", w)
	}
	if g.k.serveAt(0, g.rs, stale, 1) {
		g.log = append(g.log, admission{stale, 1})
		g.check(t)
		t.Fatal("a stale reading served from a batch taken after it")
	}
}
