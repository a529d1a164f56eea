// Package conformance is the behaviour suite every keyrate store must pass.
// Each store's tests call Run with a constructor, so every test here is a
// cross-store test: a new store gets the whole contract checked by adding
// one line.
package conformance

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// Factory returns a fresh, empty store under test that enforces limit and
// reads time from clk, or the error its constructor returned. A factory may
// call t.Skip for limits its store cannot decide exactly.
type Factory func(t *testing.T, limit keyrate.Limit, clk *clock.Manual) (keyrate.Limiter, error)

// Store describes a store under test.
type Store struct {
	// New builds the store.
	New Factory
	// Remote marks a store whose calls cross a network: the checks that
	// only an in-process store can meet (no allocation per call) are
	// skipped.
	Remote bool
	// RejectsEmptyKey marks a store that rejects the empty key with
	// keyrate.ErrInvalidKey; the suite then leaves it out.
	RejectsEmptyKey bool
	// Resolution is the finest clock step the store decides exactly (0
	// means 1ns); tests whose schedule steps finer are skipped.
	Resolution time.Duration
}

// start is the manual clock's reading when a store is created: not zero, so
// that a store that forgets its epoch is caught.
const start = 1000 * time.Hour

// Run runs the whole conformance suite against s.
func Run(t *testing.T, s Store) {
	t.Run("Fresh", func(t *testing.T) { testFresh(t, s) })
	t.Run("Exhaust", func(t *testing.T) { testExhaust(t, s) })
	t.Run("RefillNoDrift", func(t *testing.T) { testRefillNoDrift(t, s) })
	t.Run("PartialRefill", func(t *testing.T) { testPartialRefill(t, s) })
	t.Run("FractionalRate", func(t *testing.T) { testFractionalRate(t, s) })
	t.Run("Every", func(t *testing.T) { testEvery(t, s) })
	t.Run("Cost", func(t *testing.T) { testCost(t, s) })
	t.Run("CostErrors", func(t *testing.T) { testCostErrors(t, s) })
	t.Run("IndependentKeys", func(t *testing.T) { testIndependentKeys(t, s) })
	t.Run("ClockBackwards", func(t *testing.T) { testClockBackwards(t, s) })
	t.Run("LongIdle", func(t *testing.T) { testLongIdle(t, s) })
	t.Run("HugeDebt", func(t *testing.T) { testHugeDebt(t, s) })
	t.Run("PeekStoresNothing", func(t *testing.T) { testPeekStoresNothing(t, s) })
	t.Run("InvalidLimits", func(t *testing.T) { testInvalidLimits(t, s) })
	t.Run("LargeBurst", func(t *testing.T) { testLargeBurst(t, s) })
	t.Run("ConcurrentFrozenClock", func(t *testing.T) { testConcurrentFrozen(t, s) })
	t.Run("ConcurrentSteppingClock", func(t *testing.T) { testConcurrentStepping(t, s) })
	t.Run("ConcurrentManyKeys", func(t *testing.T) { testConcurrentManyKeys(t, s) })
	if !s.Remote {
		t.Run("ZeroAllocs", func(t *testing.T) { testZeroAllocs(t, s) })
	}
}

// open builds a store for limit on a fresh manual clock reading start.
func open(t *testing.T, s Store, limit keyrate.Limit) (keyrate.Limiter, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(start)
	l, err := s.New(t, limit, clk)
	if err != nil {
		t.Fatalf("New(%v): %v", limit, err)
	}
	return l, clk
}

// step is one row of a step table: at offset at from the store's creation,
// AllowN(key, cost) (or Peek(key) when peek is set) must return want.
type step struct {
	at   time.Duration
	key  string
	cost int
	peek bool
	want keyrate.Decision
}

// runSteps applies steps in order, failing with the step's index on the
// first mismatch.
func runSteps(t *testing.T, l keyrate.Limiter, clk *clock.Manual, steps []step) {
	t.Helper()
	for i, st := range steps {
		clk.Set(start + st.at)
		var got keyrate.Decision
		var err error
		if st.peek {
			got = l.Peek(st.key)
		} else {
			got, err = l.AllowN(st.key, st.cost)
		}
		if err != nil {
			t.Fatalf("step %d at +%v: AllowN(%q, %d) error: %v", i, st.at, st.key, st.cost, err)
		}
		st.want.Limit = got.Limit // compared separately below
		if got != st.want {
			op := fmt.Sprintf("AllowN(%q, %d)", st.key, st.cost)
			if st.peek {
				op = fmt.Sprintf("Peek(%q)", st.key)
			}
			t.Fatalf("step %d at +%v: %s = %+v, want %+v", i, st.at, op, got, st.want)
		}
	}
}

func allow(remaining int, reset time.Duration) keyrate.Decision {
	return keyrate.Decision{Allowed: true, Policy: keyrate.DefaultPolicy, Remaining: remaining, ResetAfter: reset, WindowResetAfter: reset}
}

func deny(remaining int, retry, reset time.Duration) keyrate.Decision {
	return keyrate.Decision{Policy: keyrate.DefaultPolicy, Remaining: remaining, RetryAfter: retry, ResetAfter: reset, WindowResetAfter: reset}
}

func testFresh(t *testing.T, s Store) {
	limit := keyrate.PerMinute(3)
	l, _ := open(t, s, limit)
	d := l.Peek("alice")
	want := keyrate.Decision{Allowed: true, Policy: keyrate.DefaultPolicy, Limit: limit, Remaining: 3}
	if d != want {
		t.Fatalf("Peek of a new key = %+v, want %+v", d, want)
	}
	d, err := l.AllowN("alice", 1)
	if err != nil || d.Limit != limit {
		t.Fatalf("AllowN = %+v, %v; want Limit %v and no error", d, err, limit)
	}
}

func testExhaust(t *testing.T, s Store) {
	l, clk := open(t, s, keyrate.PerMinute(3))
	runSteps(t, l, clk, []step{
		{at: 0, key: "k", cost: 1, want: allow(2, 20*time.Second)},
		{at: 0, key: "k", cost: 1, want: allow(1, 40*time.Second)},
		{at: 0, key: "k", cost: 1, want: allow(0, 60*time.Second)},
		{at: 0, key: "k", cost: 1, want: deny(0, 20*time.Second, 60*time.Second)},
		{at: 0, key: "k", peek: true, want: deny(0, 20*time.Second, 60*time.Second)},
		{at: 5 * time.Second, key: "k", cost: 1, want: deny(0, 15*time.Second, 55*time.Second)},
	})
	if !l.Allow("other") {
		t.Fatal("Allow(other) = false on a fresh key")
	}
}

// testRefillNoDrift is the seed-004 case: PerMinute(3) at saturation admits
// exactly one request every 20s, forever.
func testRefillNoDrift(t *testing.T, s Store) {
	l, clk := open(t, s, keyrate.PerMinute(3))
	for i := 0; i < 3; i++ {
		if !l.Allow("k") {
			t.Fatalf("request %d of the initial burst denied", i)
		}
	}
	for n := 1; n <= 500; n++ {
		clk.Set(start + time.Duration(n)*20*time.Second - time.Millisecond)
		if l.Allow("k") {
			t.Fatalf("cycle %d: allowed 1ms before the token is due", n)
		}
		clk.Set(start + time.Duration(n)*20*time.Second)
		if !l.Allow("k") {
			t.Fatalf("cycle %d: denied when the token is due", n)
		}
		if l.Allow("k") {
			t.Fatalf("cycle %d: a second request allowed in the same instant", n)
		}
	}
}

func testPartialRefill(t *testing.T, s Store) {
	l, clk := open(t, s, keyrate.PerSecond(10)) // a token every 100ms
	runSteps(t, l, clk, []step{
		{at: 0, key: "k", cost: 10, want: allow(0, time.Second)},
		{at: 250 * time.Millisecond, key: "k", peek: true, want: allow(2, 750*time.Millisecond)},
		{at: 250 * time.Millisecond, key: "k", cost: 3, want: deny(2, 50*time.Millisecond, 750*time.Millisecond)},
		{at: 300 * time.Millisecond, key: "k", cost: 3, want: allow(0, time.Second)},
		{at: 2 * time.Second, key: "k", peek: true, want: allow(10, 0)},
	})
}

// testFractionalRate checks a rate whose token interval is not a whole
// number of nanoseconds: 3 per 10s, a token every 3.333…s.
func testFractionalRate(t *testing.T, s Store) {
	if s.Resolution > time.Nanosecond {
		t.Skipf("the schedule steps by 1ns, finer than the store's %v clock", s.Resolution)
	}
	l, clk := open(t, s, keyrate.Limit{Rate: 3, Per: 10 * time.Second, Burst: 3})
	third := 3333333333 * time.Nanosecond // 10s/3, rounded down
	runSteps(t, l, clk, []step{
		{at: 0, key: "k", cost: 3, want: allow(0, 10*time.Second)},
		{at: third, key: "k", cost: 1, want: deny(0, 1, 10*time.Second-third)},
		{at: third + 1, key: "k", cost: 1, want: allow(0, 10*time.Second)},
		// 3 more tokens are due at exactly 10s+10s/3·... ; 30 tokens over 100s, no drift:
		{at: 100*time.Second + third + 1, key: "k", cost: 3, want: allow(0, 10*time.Second)},
	})
	// Saturated for 1000 tokens' worth of time: exactly 1000 admitted.
	admitted := 0
	base := 100*time.Second + third + 1
	for i := 1; i <= 3000; i++ {
		clk.Set(start + base + time.Duration(i)*third) // a hair early each time, rounding down
		for l.Allow("k") {
			admitted++
		}
	}
	// Over 3000·third (= 10000s − 1µs) after an empty bucket, 2999 tokens are due
	// (the 3000th at exactly 10000s).
	if admitted != 2999 {
		t.Fatalf("admitted %d over 3000 token intervals less 1µs, want 2999", admitted)
	}
}

func testEvery(t *testing.T, s Store) {
	l, clk := open(t, s, keyrate.Every(2*time.Second))
	runSteps(t, l, clk, []step{
		{at: 0, key: "k", cost: 1, want: allow(0, 2*time.Second)},
		{at: time.Second, key: "k", cost: 1, want: deny(0, time.Second, time.Second)},
		{at: 2 * time.Second, key: "k", cost: 1, want: allow(0, 2*time.Second)},
	})
}

func testCost(t *testing.T, s Store) {
	l, clk := open(t, s, keyrate.PerSecond(10))
	runSteps(t, l, clk, []step{
		{at: 0, key: "k", cost: 4, want: allow(6, 400*time.Millisecond)},
		{at: 0, key: "k", cost: 7, want: deny(6, 100*time.Millisecond, 400*time.Millisecond)},
		{at: 0, key: "k", cost: 6, want: allow(0, time.Second)},
		{at: 0, key: "k", cost: 10, want: deny(0, time.Second, time.Second)},
		{at: time.Second, key: "k", cost: 10, want: allow(0, time.Second)},
	})
}

func testCostErrors(t *testing.T, s Store) {
	l, _ := open(t, s, keyrate.PerSecond(5))
	l.Allow("seen")
	for _, c := range []struct {
		key  string
		cost int
		want error
	}{
		{"new", 0, keyrate.ErrInvalidCost},
		{"new", -1, keyrate.ErrInvalidCost},
		{"new", 6, keyrate.ErrCostExceedsBurst},
		{"seen", 0, keyrate.ErrInvalidCost},
		{"seen", 1 << 40, keyrate.ErrCostExceedsBurst},
	} {
		if _, err := l.AllowN(c.key, c.cost); !errors.Is(err, c.want) {
			t.Errorf("AllowN(%q, %d) error = %v, want %v", c.key, c.cost, err, c.want)
		}
	}
	if n := l.Len(); n != 1 {
		t.Errorf("Len = %d after failed calls, want 1: an error must store nothing", n)
	}
	if d := l.Peek("seen"); d.Remaining != 4 {
		t.Errorf("Peek(seen).Remaining = %d, want 4: an error must spend nothing", d.Remaining)
	}
}

func testIndependentKeys(t *testing.T, s Store) {
	l, _ := open(t, s, keyrate.PerHour(2))
	keys := []string{"a", "b", "a\x00", "日本", ""}
	if s.RejectsEmptyKey {
		keys = keys[:4]
		if _, err := l.AllowN("", 1); !errors.Is(err, keyrate.ErrInvalidKey) {
			t.Fatalf("AllowN(\"\", 1) error = %v, want ErrInvalidKey", err)
		}
	}
	for _, k := range keys {
		for i := 0; i < 2; i++ {
			if !l.Allow(k) {
				t.Fatalf("key %q: request %d denied", k, i)
			}
		}
		if l.Allow(k) {
			t.Fatalf("key %q: third request allowed", k)
		}
	}
	if n := l.Len(); n != len(keys) {
		t.Fatalf("Len = %d, want %d", n, len(keys))
	}
}

// testClockBackwards: a clock stepped backwards never mints tokens.
func testClockBackwards(t *testing.T, s Store) {
	l, clk := open(t, s, keyrate.PerMinute(3))
	clk.Set(start + time.Hour)
	for l.Allow("k") {
	}
	clk.Set(start + 30*time.Minute) // backwards by 30 minutes
	if l.Allow("k") {
		t.Fatal("allowed after the clock went backwards")
	}
	if d := l.Peek("k"); d.Allowed || d.Remaining != 0 {
		t.Fatalf("Peek after the clock went backwards = %+v, want no tokens", d)
	}
	clk.Set(start) // before everything, even a reading before the epoch
	if l.Allow("k") {
		t.Fatal("allowed with the clock at the store's creation")
	}
	clk.Set(start - time.Hour)
	if l.Allow("k") {
		t.Fatal("allowed with the clock before the store's creation")
	}
	clk.Set(start + time.Hour + 20*time.Second)
	if !l.Allow("k") || l.Allow("k") {
		t.Fatal("want exactly one token 20s after exhaustion, once the clock caught up")
	}
}

// testHugeDebt: a bucket emptied at the end of the clock range, read with
// the clock set back before the store's creation, owes more than a
// time.Duration can count at one tick per nanosecond. No Decision carries
// a negative duration: they saturate at the longest one. A store that
// cannot enforce the limit (Redis's ticks are coarser) skips.
func testHugeDebt(t *testing.T, s Store) {
	limit := keyrate.Limit{Rate: 1, Per: 1 << 62, Burst: 1}
	clk := clock.NewManual(start)
	l, err := s.New(t, limit, clk)
	if errors.Is(err, keyrate.ErrInvalidLimit) {
		t.Skipf("the store rejects %v: %v", limit, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(math.MaxInt64) // past the end of any store's clock range: time stops there
	if d, err := l.AllowN("k", 1); err != nil || !d.Allowed {
		t.Fatalf("first request at the end of the clock range = %+v, %v; want allowed", d, err)
	}
	clk.Set(0)
	check := func(op string, d keyrate.Decision) {
		t.Helper()
		if d.RetryAfter < 0 || d.ResetAfter < 0 {
			t.Fatalf("%s with the clock set back = %+v: a negative duration", op, d)
		}
		if d.Allowed || d.RetryAfter == 0 || d.ResetAfter == 0 {
			t.Fatalf("%s with the clock set back = %+v: want denied, with the (saturated) debt as RetryAfter and ResetAfter", op, d)
		}
	}
	d, err := l.AllowN("k", 1)
	if err != nil {
		t.Fatal(err)
	}
	check("AllowN", d)
	check("Peek", l.Peek("k"))
}

func testLongIdle(t *testing.T, s Store) {
	limit := keyrate.PerSecond(100).WithBurst(250)
	l, clk := open(t, s, limit)
	for l.Allow("k") {
	}
	for _, idle := range []time.Duration{365 * 24 * time.Hour, 10 * 365 * 24 * time.Hour} {
		clk.Advance(idle)
		if d := l.Peek("k"); d != (keyrate.Decision{Allowed: true, Policy: keyrate.DefaultPolicy, Limit: limit, Remaining: 250}) {
			t.Fatalf("after %v idle: Peek = %+v, want a full bucket", idle, d)
		}
		n := 0
		for l.Allow("k") {
			n++
		}
		if n != 250 {
			t.Fatalf("after %v idle: admitted %d, want 250", idle, n)
		}
	}
}

func testPeekStoresNothing(t *testing.T, s Store) {
	l, _ := open(t, s, keyrate.PerSecond(3))
	for i := 0; i < 10; i++ {
		if d := l.Peek("ghost"); !d.Allowed || d.Remaining != 3 {
			t.Fatalf("Peek(ghost) = %+v, want a full bucket", d)
		}
	}
	if n := l.Len(); n != 0 {
		t.Fatalf("Len = %d after Peek of an unknown key, want 0", n)
	}
	l.Allow("k")
	for i := 0; i < 10; i++ {
		if d := l.Peek("k"); d.Remaining != 2 {
			t.Fatalf("Peek(k).Remaining = %d, want 2: Peek must not spend", d.Remaining)
		}
	}
}

func testInvalidLimits(t *testing.T, s Store) {
	for _, lim := range []keyrate.Limit{
		{},
		{Rate: 0, Per: time.Second, Burst: 1},
		{Rate: -1, Per: time.Second, Burst: 1},
		{Rate: 1, Per: 0, Burst: 1},
		{Rate: 1, Per: -time.Second, Burst: 1},
		{Rate: 1, Per: time.Second, Burst: 0},
		{Rate: 1, Per: time.Second, Burst: -5},
		{Rate: 999_999_937, Per: time.Second, Burst: 1},  // a token every ~1ns, not representable exactly
		keyrate.Every(24 * time.Hour).WithBurst(1 << 30), // fill time beyond the packed state's range
	} {
		l, err := s.New(t, lim, clock.NewManual(start))
		if !errors.Is(err, keyrate.ErrInvalidLimit) || l != nil {
			t.Errorf("New(%+v) = %v, %v; want a nil store and ErrInvalidLimit", lim, l, err)
		}
	}
}

func testLargeBurst(t *testing.T, s Store) {
	l, clk := open(t, s, keyrate.PerSecond(1000).WithBurst(1_000_000))
	d, err := l.AllowN("k", 1_000_000)
	if err != nil || !d.Allowed || d.Remaining != 0 || d.ResetAfter != 1000*time.Second {
		t.Fatalf("AllowN(k, 1e6) = %+v, %v; want allowed, 0 left, full in 1000s", d, err)
	}
	clk.Advance(500 * time.Second)
	if d := l.Peek("k"); d.Remaining != 500_000 {
		t.Fatalf("Remaining after 500s = %d, want 500000", d.Remaining)
	}
}

// hammer releases g goroutines together and has each call f n times,
// returning the total f reported true.
func hammer(g, n int, f func(gi, i int) bool) int64 {
	var admitted atomic.Int64
	Together(g, func(gi int) {
		local := int64(0)
		for i := 0; i < n; i++ {
			if f(gi, i) {
				local++
			}
		}
		admitted.Add(local)
	})
	return admitted.Load()
}

// Together runs f(0) to f(g−1), each in a goroutine of its own, released
// at once when all have started (the barrier that makes a concurrency
// check race its goroutines rather than run them one after another), and
// returns when every one has returned.
func Together(g int, f func(gi int)) {
	var ready, done sync.WaitGroup
	release := make(chan struct{})
	ready.Add(g)
	done.Add(g)
	for gi := range g {
		go func() {
			defer done.Done()
			ready.Done()
			<-release
			f(gi)
		}()
	}
	ready.Wait()
	close(release)
	done.Wait()
}

// procs is the GOMAXPROCS values the concurrency tests repeat at.
var procs = []int{1, 2, 4, 8}

func eachProcs(t *testing.T, f func(t *testing.T)) {
	for _, p := range procs {
		t.Run(fmt.Sprintf("procs=%d", p), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
			f(t)
		})
	}
}

// testConcurrentFrozen: goroutines released together on one full key with
// the clock frozen admit exactly Burst, never Burst+1.
func testConcurrentFrozen(t *testing.T, s Store) {
	eachProcs(t, func(t *testing.T) {
		const burst = 100
		l, _ := open(t, s, keyrate.PerHour(burst))
		got := hammer(16, 50, func(_, _ int) bool { return l.Allow("hot") })
		if got != burst {
			t.Fatalf("admitted %d with the clock frozen, want exactly %d", got, burst)
		}
		// Mixed costs: the admitted cost is the burst, exactly, once drained by cost 1.
		l, _ = open(t, s, keyrate.PerHour(burst))
		var cost atomic.Int64
		hammer(8, 50, func(gi, i int) bool {
			c := 1 + (gi+i)%5
			d, err := l.AllowN("hot", c)
			if err == nil && d.Allowed {
				cost.Add(int64(c))
			}
			return false
		})
		for l.Allow("hot") {
			cost.Add(1)
		}
		if cost.Load() != burst {
			t.Fatalf("admitted cost %d with the clock frozen, want exactly %d", cost.Load(), burst)
		}
	})
}

// testConcurrentStepping: with the clock stepping while goroutines hammer
// one key, the total admitted never exceeds Burst + Rate·T/Per.
func testConcurrentStepping(t *testing.T, s Store) {
	eachProcs(t, func(t *testing.T) {
		const rate, burst = 10, 5 // a token every 100ms
		l, clk := open(t, s, keyrate.PerSecond(rate).WithBurst(burst))
		stop := make(chan struct{})
		stepped := make(chan time.Duration)
		go func() {
			var total time.Duration
			for i := 0; ; i++ {
				select {
				case <-stop:
					stepped <- total
					return
				default:
				}
				d := time.Duration(1+i%97) * time.Millisecond
				clk.Advance(d)
				total += d
				runtime.Gosched()
			}
		}()
		got := hammer(8, 2000, func(_, _ int) bool { return l.Allow("hot") })
		close(stop)
		elapsed := <-stepped
		bound := int64(burst) + int64(elapsed*rate/time.Second)
		if got > bound {
			t.Fatalf("admitted %d over %v, above the bound %d", got, elapsed, bound)
		}
		if got < burst {
			t.Fatalf("admitted %d, fewer than the burst %d", got, burst)
		}
	})
}

func testConcurrentManyKeys(t *testing.T, s Store) {
	eachProcs(t, func(t *testing.T) {
		const keys, burst = 64, 3
		l, _ := open(t, s, keyrate.PerHour(burst))
		var perKey [keys]atomic.Int64
		hammer(8, 400, func(gi, i int) bool {
			k := (gi*7 + i) % keys
			if l.Allow(fmt.Sprint("key-", k)) {
				perKey[k].Add(1)
			}
			return false
		})
		for k := range perKey {
			if n := perKey[k].Load(); n != burst {
				t.Fatalf("key %d admitted %d, want exactly %d", k, n, burst)
			}
		}
		if n := l.Len(); n != keys {
			t.Fatalf("Len = %d, want %d", n, keys)
		}
	})
}

func testZeroAllocs(t *testing.T, s Store) {
	l, clk := open(t, s, keyrate.PerSecond(1000))
	l.Allow("existing")
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		clk.Advance(time.Millisecond)
		l.Allow("existing")
		if _, err := l.AllowN("existing", 1+i%3); err != nil {
			t.Fatal(err)
		}
		l.Peek("existing")
	})
	if allocs != 0 {
		t.Fatalf("Allow/AllowN/Peek on an existing key: %v allocations per run, want 0", allocs)
	}
}
