package conformance

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/racetest"
	"github.com/keyrate/keyrate/internal/rules"
)

// attackScale returns the key-rotation attack's size: the distinct keys
// streamed, the store's cap and the new keys per manual millisecond.
// KEYRATE_ATTACK_KEYS sets the keys (the full run is 10 000 000); the
// default is 500 000, and 100 000 (cap 5 000) under -short or -race.
func attackScale(t *testing.T) (keys, cap, perMs int) {
	keys, cap, perMs = 500_000, 100_000, 2000
	if testing.Short() || racetest.Enabled {
		keys, cap, perMs = 100_000, 5_000, 100
	}
	if v := os.Getenv("KEYRATE_ATTACK_KEYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("KEYRATE_ATTACK_KEYS=%q is not a positive count", v)
		}
		keys = n
	}
	return keys, cap, perMs
}

// testRotationAttack streams distinct keys, each used once, into a store
// capped at cap keys, perMs of them per manual millisecond: twice as many
// as go idle (full again, 100ms after their one spend) in that time, so
// the store is full half the time. Meanwhile three legitimate keys ask
// every millisecond, ten times their rate: every one of their decisions
// must be what a store that never evicts and has no cap would give, the
// live heap must stay bounded, and the store must stay within its cap.
func testRotationAttack(t *testing.T, s Bounded) {
	keys, cap, perMs := attackScale(t)
	limit := keyrate.PerSecond(10) // a token every 100ms, full after 1s
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc

	l, clk := openBounded(t, s, limit, keyrate.WithMaxKeys(cap))
	ref, err := rules.NewRule(limit, clk)
	if err != nil {
		t.Fatal(err)
	}
	legit := []string{"alice", "bob", "carol"}
	legitState := make([]rules.State, len(legit))
	var peak, first uint64
	checkpoint := max(keys/10, perMs)
	buf := []byte("attacker-")
	for n := 0; n < keys; {
		for i, k := range legit {
			now := ref.Now()
			next, ok := ref.Take(legitState[i], now, 1)
			legitState[i] = next
			if got := l.Allow(k); got != ok {
				t.Fatalf("after %d attacker keys: Allow(%q) = %v, a store that never evicts gives %v", n, k, got, ok)
			}
		}
		for j := 0; j < perMs && n < keys; j++ {
			buf = strconv.AppendInt(buf[:len("attacker-")], int64(n), 10)
			_, err := l.AllowN(string(buf), 1)
			if err != nil && !errors.Is(err, keyrate.ErrStoreFull) {
				t.Fatalf("AllowN(attacker key): %v", err)
			}
			if n++; n%checkpoint == 0 {
				if k := l.Len(); k > cap {
					t.Fatalf("after %d attacker keys: Len = %d, above the cap of %d", n, k, cap)
				}
				runtime.GC()
				runtime.ReadMemStats(&ms)
				live := ms.HeapAlloc - min(base, ms.HeapAlloc)
				peak = max(peak, live)
				if first == 0 && n >= 2*cap { // once the store has filled up
					first = live
				}
			}
		}
		clk.Advance(time.Millisecond)
	}
	st := l.Stats()
	t.Logf("%d attacker keys, cap %d: peak live heap %.1f MiB (%.0f B per capped key), first checkpoint %.1f MiB; %+v",
		keys, cap, float64(peak)/(1<<20), float64(peak)/float64(cap), float64(first)/(1<<20), st)
	if st.Evictions == 0 || st.Refused == 0 {
		t.Fatalf("Stats = %+v: the attack should have caused both evictions and refusals", st)
	}
	// A tracked key costs a few hundred bytes at most in any store; allow
	// 1 KiB per key of the cap, and no growth after the store first filled
	// beyond half as much again (map tables resize in steps).
	if limit := uint64(cap) * 1024; peak > limit {
		t.Fatalf("peak live heap %d B is above %d B (1 KiB per capped key)", peak, limit)
	}
	if peak > first*3/2+4<<20 {
		t.Fatalf("live heap grew from %d B at the first checkpoint to %d B: not bounded", first, peak)
	}
}
