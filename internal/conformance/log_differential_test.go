package conformance_test

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
)

// FuzzStoresAgreeLog is FuzzStoresAgree for keyrate.SlidingLog on the
// stores that carry it (the limit is Rate per Per), with sweeps (an
// invalid cost's operation sweeps instead) on a clock that steps backwards
// too. Each store must decide every operation as LogModel does (a reading
// older than the latest a key has seen is decided at that latest one)
// while the clock has only moved forwards or no sweep has evicted
// anything: sweeps change no decision. (A key evicted and then read with
// the clock stepped back before its floor is denied, where the model may
// allow: eviction only denies more.) At every step, no interval of length
// Per may hold more than Rate admissions of one key, each counted at the
// latest reading its key had seen.
func FuzzStoresAgreeLog(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		limit, ops, ok := decode(data, true)
		if !ok {
			return
		}
		limit = keyrate.Limit{Rate: limit.Rate, Per: limit.Per}.Using(keyrate.SlidingLog)
		clk := clock.NewManual(time.Hour)
		var limiters []keyrate.Limiter
		for _, s := range stores[:2] { // mutex and striped; atomic refuses the log
			l, err := s.new(limit, keyrate.WithClock(clk))
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			defer l.(keyrate.BoundedLimiter).Close()
			limiters = append(limiters, l)
		}
		models := map[string]*conformance.LogModel{}
		seen := map[string]int64{}                          // key → latest reading
		logged := make([]map[string][]int64, len(limiters)) // store → key → admissions, at the reading each counts at
		for j := range logged {
			logged[j] = map[string][]int64{}
		}
		hi, forwards, evicted := clk.Now(), true, false
		for i, o := range ops {
			now := clk.Advance(o.step)
			forwards = forwards && now >= hi
			hi = max(hi, now)
			tick := max(0, int64(now-time.Hour)) // a reading before the epoch is tick 0
			if o.cost < 0 || o.cost > limit.Rate {
				for _, l := range limiters {
					evicted = l.(keyrate.BoundedLimiter).Sweep() > 0 || evicted
				}
				continue
			}
			exact := forwards || !evicted
			m := models[o.key]
			if m == nil {
				m = conformance.NewLogModel(limit)
				models[o.key] = m
			}
			var want keyrate.Decision
			if o.cost == 0 {
				want = m.Decide(tick, 1, m.Allows(tick, 1))
			} else {
				want = m.Decide(tick, int64(o.cost), m.Take(tick, int64(o.cost)))
				seen[o.key] = max(seen[o.key], tick)
			}
			want.Policy, want.Limit = keyrate.DefaultPolicy, limit
			for j, l := range limiters {
				got, err := apply(l, o)
				if err != nil || (exact && got != want) {
					t.Fatalf("op %d (%+v) at tick %d: %s = %+v, %v; model %+v", i, o, tick, stores[j].name, got, err, want)
				}
				if o.cost == 0 || !got.Allowed {
					continue
				}
				for range o.cost {
					logged[j][o.key] = append(logged[j][o.key], seen[o.key])
				}
				in := 0
				for _, a := range logged[j][o.key] {
					if a > seen[o.key]-int64(limit.Per) {
						in++
					}
				}
				if in > limit.Rate {
					t.Fatalf("op %d: %s admitted %d of key %s in the window ending at %d, above %d", i, stores[j].name, in, o.key, seen[o.key], limit.Rate)
				}
			}
		}
	})
}
