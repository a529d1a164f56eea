package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/sweep"
)

// Bounded describes a store under the eviction checks: one that implements
// keyrate.BoundedLimiter and takes options.
type Bounded struct {
	// Name names the store in benchmark names (store=Name).
	Name string
	// New builds the store with the given limit, clock and options.
	New func(tb testing.TB, limit keyrate.Limit, clk *clock.Manual, opts ...keyrate.Option) (keyrate.BoundedLimiter, error)
}

// keyModes are the key options every eviction check runs under.
var keyModes = []struct {
	name string
	opts []keyrate.Option
}{
	{"keys=string", nil},
	{"keys=hashed", []keyrate.Option{keyrate.WithHashedKeys()}},
}

// RunEviction runs the eviction checks against s, each with plain and with
// hashed keys.
func RunEviction(t *testing.T, s Bounded) {
	for _, mode := range keyModes {
		t.Run(mode.name, func(t *testing.T) {
			m := s.with(mode.opts...)
			t.Run("SweepRemovesOnlyFull", func(t *testing.T) { testSweepRemovesOnlyFull(t, m) })
			t.Run("MatchesNeverEvicting", func(t *testing.T) { testMatchesNeverEvicting(t, m) })
			t.Run("YearIdle", func(t *testing.T) { testYearIdle(t, m) })
			t.Run("ClockBackwardsAfterSweep", func(t *testing.T) { testClockBackwardsAfterSweep(t, m) })
			t.Run("Incremental", func(t *testing.T) { testIncremental(t, m) })
			t.Run("Grace", func(t *testing.T) { testGrace(t, m) })
			t.Run("MaxKeys", func(t *testing.T) { testMaxKeys(t, m) })
			t.Run("MaxKeysConcurrent", func(t *testing.T) { testMaxKeysConcurrent(t, m) })
			t.Run("SweepRace", func(t *testing.T) { testSweepRace(t, m) })
			t.Run("Background", func(t *testing.T) { testBackground(t, m) })
			t.Run("RotationAttack", func(t *testing.T) { testRotationAttack(t, m) })
			t.Run("OtherKeyEvicted", func(t *testing.T) { testOtherKeyEvicted(t, m) })
			t.Run("NewKeysUnderSweep", func(t *testing.T) { testNewKeysUnderSweep(t, m) })
			t.Run("FullStoreSweptUnderCaller", func(t *testing.T) { testFullStoreSweptUnderCaller(t, m) })
			t.Run("FullStoreChurn", func(t *testing.T) { testFullStoreChurn(t, m) })
			t.Run("LenWithinCap", func(t *testing.T) { testLenWithinCap(t, m) })

		})
	}
	t.Run("InvalidOptions", func(t *testing.T) { testInvalidOptions(t, s) })
}

// with returns s with opts put before every constructor's own options.
func (s Bounded) with(opts ...keyrate.Option) Bounded {
	if len(opts) == 0 {
		return s
	}
	inner := s.New
	s.New = func(tb testing.TB, limit keyrate.Limit, clk *clock.Manual, more ...keyrate.Option) (keyrate.BoundedLimiter, error) {
		return inner(tb, limit, clk, append(append([]keyrate.Option(nil), opts...), more...)...)
	}
	return s
}

// openBounded builds s for limit on a fresh manual clock reading start,
// and closes it when the test ends.
func openBounded(tb testing.TB, s Bounded, limit keyrate.Limit, opts ...keyrate.Option) (keyrate.BoundedLimiter, *clock.Manual) {
	tb.Helper()
	clk := clock.NewManual(start)
	l, err := s.New(tb, limit, clk, opts...)
	if err != nil {
		tb.Fatalf("New(%v): %v", limit, err)
	}
	tb.Cleanup(func() { l.Close() })
	return l, clk
}

// wantStats fails unless l's Stats are want.
func wantStats(t *testing.T, l keyrate.BoundedLimiter, want keyrate.Stats) {
	t.Helper()
	if got := l.Stats(); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}

// wantFull fails unless key's bucket is full: Peek says so and exactly
// Burst requests are admitted.
func wantFull(t *testing.T, l keyrate.Limiter, limit keyrate.Limit, key string) {
	t.Helper()
	if d := l.Peek(key); d != (keyrate.Decision{Allowed: true, Policy: keyrate.DefaultPolicy, Limit: limit, Remaining: limit.Burst}) {
		t.Fatalf("Peek(%q) = %+v, want a full bucket", key, d)
	}
	n := 0
	for l.Allow(key) {
		n++
	}
	if n != limit.Burst {
		t.Fatalf("key %q admitted %d, want a full bucket's %d", key, n, limit.Burst)
	}
}

// testSweepRemovesOnlyFull: a sweep removes a bucket at the exact tick it
// is full again, not one nanosecond before.
func testSweepRemovesOnlyFull(t *testing.T, s Bounded) {
	limit := keyrate.PerMinute(3) // a token every 20s, full after 60s
	l, clk := openBounded(t, s, limit)
	l.Allow("a") // full again at +20s
	for i := 0; i < 3; i++ {
		l.Allow("b") // empty: full again at +60s
	}
	l.Peek("ghost") // stores nothing
	// The clock only moves forward: an insertion may evict a full key of
	// its stripe, so going back to before that would find it gone.
	for _, c := range []struct {
		at        time.Duration
		removed   int
		keys      int
		evictions uint64
	}{
		{20*time.Second - time.Nanosecond, 0, 2, 0},
		{20 * time.Second, 1, 1, 1},
		{60*time.Second - time.Nanosecond, 0, 1, 1},
		{60 * time.Second, 1, 0, 2},
		{time.Hour, 0, 0, 2},
	} {
		clk.Set(start + c.at)
		if n := l.Sweep(); n != c.removed {
			t.Fatalf("Sweep at +%v removed %d, want %d", c.at, n, c.removed)
		}
		if n := l.Len(); n != c.keys {
			t.Fatalf("Len after Sweep at +%v = %d, want %d", c.at, n, c.keys)
		}
		wantStats(t, l, keyrate.Stats{Keys: c.keys, Evictions: c.evictions})
	}
	wantFull(t, l, limit, "a")
	wantFull(t, l, limit, "b")
	if err := l.Close(); err != nil {
		t.Fatalf("Close on a store without a sweeper: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if !l.Allow("c") {
		t.Fatal("a closed store denied a new key: it must keep working")
	}
}

// testMatchesNeverEvicting replays random traffic, with sweeps between
// calls, on the store and on a reference that never evicts (the shared
// Policy over a plain map): every decision must be equal.
func testMatchesNeverEvicting(t *testing.T, s Bounded) {
	limit := keyrate.PerSecond(4).WithBurst(6) // a token every 250ms, full after 1.5s
	l, clk := openBounded(t, s, limit)
	ref, err := rules.NewRule(limit, clk)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]rules.State{}
	rng := rand.New(rand.NewPCG(1, 2))
	steps := 20000
	if testing.Short() {
		steps = 4000
	}
	for i := 0; i < steps; i++ {
		switch r := rng.IntN(100); {
		case r < 10:
			// Land on and around the instants buckets fill up.
			clk.Advance(time.Duration(rng.IntN(7)) * 250 * time.Millisecond)
		case r < 20:
			clk.Advance(time.Duration(rng.IntN(1_000_000)) * time.Microsecond)
		case r < 30:
			l.Sweep()
		}
		key := "k" + strconv.Itoa(rng.IntN(40))
		now := ref.Now()
		if rng.IntN(5) == 0 {
			got := l.Peek(key)
			if want := ref.Peek(states[key], now); got != want {
				t.Fatalf("step %d: Peek(%q) = %+v, want %+v", i, key, got, want)
			}
			continue
		}
		cost := 1 + rng.IntN(3)
		got, err := l.AllowN(key, cost)
		next, ok := ref.Take(states[key], now, cost)
		states[key] = next
		if want := ref.Decide(next, now, cost, ok); err != nil || got != want {
			t.Fatalf("step %d: AllowN(%q, %d) = %+v, %v; a store that never evicts gives %+v", i, key, cost, got, err, want)
		}
	}
	if l.Stats().Evictions == 0 {
		t.Fatal("no evictions: the test exercised nothing")
	}
}

const year = 365 * 24 * time.Hour

// testYearIdle: keys left alone for a year come back full, whether the
// store was called meanwhile (new keys, sweeps) or not at all.
func testYearIdle(t *testing.T, s Bounded) {
	limit := keyrate.PerSecond(100).WithBurst(250)
	keys := []string{"a", "b", "", "日本"}
	for _, busy := range []bool{false, true} {
		t.Run(fmt.Sprintf("busy=%v", busy), func(t *testing.T) {
			l, clk := openBounded(t, s, limit)
			for _, k := range keys {
				for l.Allow(k) {
				}
			}
			if busy {
				for day := 0; day < 365; day++ {
					clk.Advance(24 * time.Hour)
					l.Allow(fmt.Sprint("day-", day))
					if day%30 == 0 {
						l.Sweep()
					}
				}
			} else {
				clk.Advance(year)
			}
			for _, k := range keys {
				wantFull(t, l, limit, k)
			}
			clk.Advance(year) // and a second year, after the keys were used again
			if busy {
				l.Sweep()
			}
			for _, k := range keys {
				wantFull(t, l, limit, k)
			}
		})
	}
}

// testClockBackwardsAfterSweep: a key swept at some instant, asked again
// with the clock stepped back before that instant, gets no more than the
// bucket it replaced would have had: eviction never mints tokens.
func testClockBackwardsAfterSweep(t *testing.T, s Bounded) {
	limit := keyrate.PerSecond(10) // full 1s after being emptied
	l, clk := openBounded(t, s, limit)
	for l.Allow("k") {
	}
	clk.Advance(time.Second)
	if n := l.Sweep(); n != 1 {
		t.Fatalf("Sweep removed %d, want 1", n)
	}
	clk.Advance(-500 * time.Millisecond) // the old bucket would hold 5 tokens here
	n := 0
	for l.Allow("k") {
		n++
	}
	if n > 5 {
		t.Fatalf("admitted %d with the clock stepped back to when the swept bucket held 5", n)
	}
}

// testIncremental: a store that nobody sweeps still bounds itself while
// new keys stream in, by the paced sweeps of the calls that insert them.
func testIncremental(t *testing.T, s Bounded) {
	limit := keyrate.PerSecond(10) // a key used once is full again after 100ms
	l, clk := openBounded(t, s, limit, keyrate.WithEvictionGrace(0))
	const perStep, steps = 100, 400 // 40 000 keys, 1 000 live at any instant
	peak := 0
	for i := 0; i < steps; i++ {
		for j := 0; j < perStep; j++ {
			if !l.Allow(fmt.Sprint("s", i, "-", j)) {
				t.Fatal("a new key was denied")
			}
		}
		clk.Advance(10 * time.Millisecond)
		peak = max(peak, l.Len())
	}
	// About 1 000 keys are live (used within the last 100ms). The paced
	// sweeps let idle keys accumulate to a period's worth (as many as
	// the last sweep left, at least sweep.MinPace) before the next; a
	// sweep on a goroutine of its own may fall up to sweep.AssistRatio
	// periods behind before inserters wait for it.
	const live = 1000
	if bound := (sweep.AssistRatio + 2) * (live + sweep.MinPace); peak > bound {
		t.Fatalf("Len peaked at %d over %d keys without a Sweep call, want at most %d", peak, steps*perStep, bound)
	}
	t.Logf("Len peaked at %d with about %d keys live", peak, live)
	if l.Stats().Evictions == 0 {
		t.Fatal("no evictions without a Sweep call")
	}
}

// testGrace: routine maintenance (paced sweeps, which run on the caller
// once the store is closed, and the striped store's sampling) evicts a
// bucket only once it has been full for the grace period, and a full
// store evicts any full bucket.
func testGrace(t *testing.T, s Bounded) {
	limit := keyrate.PerSecond(10) // a key used once is full again after 100ms
	const grace = time.Second
	l, clk := openBounded(t, s, limit, keyrate.WithEvictionGrace(grace))
	l.Close() // from now on paced sweeps run on the inserting goroutine
	batch := func(name string) {
		t.Helper()
		for i := range 4 * sweep.MinPace {
			if !l.Allow(fmt.Sprint(name, i)) {
				t.Fatalf("new key %s%d denied", name, i)
			}
		}
	}
	batch("a")               // full from +100ms
	clk.Advance(time.Second) // a: full for 900ms
	batch("b")               // full from +1.1s
	if st := l.Stats(); st.Evictions != 0 {
		t.Fatalf("%d buckets evicted, full for under the grace period of %v", st.Evictions, grace)
	}
	clk.Advance(200 * time.Millisecond) // a: full for 1.1s; b: for 100ms
	// Paced sweeps come once the keys inserted since the last match the
	// keys it kept (as Go's heap goal does): insert c's keys until one
	// has run.
	inserted := 0
	for ; l.Stats().Evictions == 0 && inserted < 64*sweep.MinPace; inserted++ {
		if !l.Allow(fmt.Sprint("c", inserted)) {
			t.Fatalf("new key c%d denied", inserted)
		}
	}
	if st := l.Stats(); st.Evictions == 0 {
		t.Fatalf("no bucket evicted after %d new keys; a's have been full for 1.1s, over the grace period of %v", inserted, grace)
	}
	if got, want := l.Len(), 4*sweep.MinPace+inserted; got < want {
		t.Fatalf("Len = %d, below the %d keys of b and c: a bucket full for less than %v was evicted", got, want, grace)
	}

	full, clk := openBounded(t, s, limit, keyrate.WithEvictionGrace(time.Hour), keyrate.WithMaxKeys(2))
	full.Allow("x")
	full.Allow("y")
	clk.Advance(200 * time.Millisecond) // both full, for 100ms
	if !full.Allow("z") {
		t.Fatal("a full store refused a new key with full buckets to evict: the grace period applies only to routine maintenance")
	}
}

// testMaxKeys: a full store refuses new keys (fail-closed) while serving
// the keys it has, and makes room by evicting full buckets only.
func testMaxKeys(t *testing.T, s Bounded) {
	limit := keyrate.PerSecond(10) // a token every 100ms, full after 1s
	l, clk := openBounded(t, s, limit, keyrate.WithMaxKeys(3))
	l.Allow("a") // full again at +100ms
	l.Allow("b")
	clk.Advance(50 * time.Millisecond)
	l.Allow("c") // full again at +150ms
	if n := l.Len(); n != 3 {
		t.Fatalf("Len = %d, want 3", n)
	}
	d, err := l.AllowN("d", 1)
	if !errors.Is(err, keyrate.ErrStoreFull) || d.Allowed {
		t.Fatalf("AllowN(new key) on a full store = %+v, %v; want ErrStoreFull", d, err)
	}
	if !strings.Contains(err.Error(), "3") {
		t.Fatalf("ErrStoreFull message %q does not name the limit of 3", err)
	}
	if l.Allow("d") {
		t.Fatal("Allow(new key) on a full store = true")
	}
	if d := l.Peek("d"); !d.Allowed || d.Remaining != 10 {
		t.Fatalf("Peek(new key) on a full store = %+v, want a full bucket (Peek stores nothing)", d)
	}
	for _, k := range []string{"a", "b", "c"} {
		if !l.Allow(k) {
			t.Fatalf("existing key %q denied on a full store", k)
		}
	}
	for l.Allow("c") { // c empty at +50ms: full again at +1.05s
	}
	wantStats(t, l, keyrate.Stats{Keys: 3, Refused: 2})
	// At +1.01s "a" and "b" (last used at +50ms) are full again; "c" is
	// not: two slots can be freed, no more.
	clk.Set(start + time.Second + 10*time.Millisecond)
	for _, k := range []string{"d", "e"} {
		if d, err := l.AllowN(k, 1); err != nil || !d.Allowed {
			t.Fatalf("AllowN(%q) after two keys went idle = %+v, %v; want allowed", k, d, err)
		}
	}
	if _, err := l.AllowN("f", 1); !errors.Is(err, keyrate.ErrStoreFull) {
		t.Fatalf("AllowN(f) = %v, want ErrStoreFull: c is not idle and must not be evicted", err)
	}
	if d := l.Peek("c"); d.Remaining != 9 {
		t.Fatalf("Peek(c).Remaining = %d, want 9: a bucket that is not full must be kept", d.Remaining)
	}
	if n := l.Len(); n != 3 {
		t.Fatalf("Len = %d, want 3", n)
	}
	st := l.Stats()
	if st.Evictions != 2 || st.Refused != 3 || st.Keys != 3 {
		t.Fatalf("Stats = %+v, want 3 keys, 2 evictions, 3 refused", st)
	}
	if _, err := l.AllowN("f", 0); !errors.Is(err, keyrate.ErrInvalidCost) {
		t.Fatalf("AllowN(f, 0) = %v, want ErrInvalidCost before the cap is looked at", err)
	}
}

// testMaxKeysConcurrent: goroutines inserting distinct keys at once never
// get more than the cap in, and everyone beyond it is refused.
func testMaxKeysConcurrent(t *testing.T, s Bounded) {
	eachProcs(t, func(t *testing.T) {
		const cap, g, n = 500, 8, 200 // 1600 new keys for 500 slots
		l, _ := openBounded(t, s, keyrate.PerHour(1), keyrate.WithMaxKeys(cap))
		var refused atomic.Int64
		admitted := hammer(g, n, func(gi, i int) bool {
			_, err := l.AllowN(fmt.Sprint(gi, "/", i), 1)
			if errors.Is(err, keyrate.ErrStoreFull) {
				refused.Add(1)
			}
			if n := l.Len(); n > cap {
				t.Errorf("Len = %d, above the cap of %d", n, cap)
			}
			return err == nil
		})
		if admitted != cap || refused.Load() != g*n-cap {
			t.Fatalf("admitted %d and refused %d of %d new keys, want %d and %d", admitted, refused.Load(), g*n, cap, g*n-cap)
		}
		wantStats(t, l, keyrate.Stats{Keys: cap, Refused: uint64(g*n - cap)})
	})
}

// testBackground: WithSweepInterval sweeps with no call to Sweep, and
// Close stops its goroutine (checked with goleak).
func testBackground(t *testing.T, s Bounded) {
	defer goleak.VerifyNone(t)
	limit := keyrate.PerSecond(10)
	l, clk := openBounded(t, s, limit, keyrate.WithSweepInterval(time.Millisecond))
	for i := 0; i < 10; i++ {
		l.Allow(strconv.Itoa(i))
	}
	clk.Advance(time.Second + keyrate.DefaultEvictionGrace) // full, and for the default grace
	// Wait for the sweeper's work, not for time: it runs every real
	// millisecond, so this ends within a few unless it is broken.
	deadline := time.Now().Add(10 * time.Second)
	for l.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Len = %d ten seconds after the keys went idle, with a 1ms background sweeper", l.Len())
		}
		time.Sleep(time.Millisecond)
	}
	if st := l.Stats(); st.Evictions != 10 {
		t.Fatalf("Stats = %+v, want 10 evictions", st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ { // Close again, concurrently
		wg.Add(1)
		go func() { defer wg.Done(); l.Close() }()
	}
	wg.Wait()
	if !l.Allow("after") || l.Sweep() != 0 {
		t.Fatal("a closed store must keep working")
	}
}

func testInvalidOptions(t *testing.T, s Bounded) {
	for name, opt := range map[string]keyrate.Option{
		"WithMaxKeys(0)":          keyrate.WithMaxKeys(0),
		"WithMaxKeys(-1)":         keyrate.WithMaxKeys(-1),
		"WithSweepInterval(0)":    keyrate.WithSweepInterval(0),
		"WithSweepInterval(-1s)":  keyrate.WithSweepInterval(-time.Second),
		"WithEvictionGrace(-1ns)": keyrate.WithEvictionGrace(-1),
		"WithClock(nil *Manual)":  keyrate.WithClock((*clock.Manual)(nil)),
	} {
		l, err := s.New(t, keyrate.PerSecond(1), clock.NewManual(start), opt)
		if !errors.Is(err, keyrate.ErrInvalidOption) || l != nil {
			t.Errorf("New with %s = %v, %v; want a nil store and ErrInvalidOption", name, l, err)
		}
	}
}
