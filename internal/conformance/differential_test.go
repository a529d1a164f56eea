package conformance_test

import (
	"errors"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// stores are every in-process store, for the differential targets.
var stores = []struct {
	name string
	new  func(keyrate.Limit, ...keyrate.Option) (keyrate.Limiter, error)
}{
	{"mutex", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.Limiter, error) { return mutexbucket.New(l, o...) }},
	{"striped", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.Limiter, error) { return striped.New(l, o...) }},
	{"atomic", func(l keyrate.Limit, o ...keyrate.Option) (keyrate.Limiter, error) { return atomicbucket.New(l, o...) }},
}

// reference is the exact rational token bucket, written the textbook way
// (tokens and a last-refill time per key) with math/big, independently of
// keyrate's packed arithmetic.
type reference struct {
	limit   keyrate.Limit
	buckets map[string]*refBucket
}

type refBucket struct {
	tokens *big.Rat
	last   time.Duration
}

// tokens returns key's tokens at now, refilled and capped, without storing.
func (r *reference) tokens(key string, now time.Duration) *big.Rat {
	burst := big.NewRat(int64(r.limit.Burst), 1)
	b, ok := r.buckets[key]
	if !ok {
		return burst
	}
	elapsed := big.NewRat(int64(now-b.last)*int64(r.limit.Rate), int64(r.limit.Per))
	t := new(big.Rat).Add(b.tokens, elapsed)
	if t.Cmp(burst) > 0 {
		t = burst
	}
	return t
}

// wait returns the time until a bucket holding t tokens holds want, rounded
// up to a nanosecond; 0 if it already does.
func (r *reference) wait(t *big.Rat, want int) time.Duration {
	short := new(big.Rat).Sub(big.NewRat(int64(want), 1), t)
	if short.Sign() <= 0 {
		return 0
	}
	ns := new(big.Rat).Mul(short, big.NewRat(int64(r.limit.Per), int64(r.limit.Rate)))
	q, m := new(big.Int).QuoRem(ns.Num(), ns.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return time.Duration(q.Int64())
}

func (r *reference) decision(t *big.Rat, allowed bool, cost int) keyrate.Decision {
	floor := new(big.Int).Quo(t.Num(), t.Denom())
	reset := r.wait(t, r.limit.Burst)
	d := keyrate.Decision{
		Allowed:          allowed,
		Policy:           keyrate.DefaultPolicy,
		Limit:            r.limit,
		Remaining:        int(floor.Int64()),
		ResetAfter:       reset,
		WindowResetAfter: reset,
	}
	if !allowed {
		d.RetryAfter = r.wait(t, cost)
	}
	return d
}

func (r *reference) AllowN(key string, cost int, now time.Duration) (keyrate.Decision, error) {
	switch {
	case cost < 1:
		return keyrate.Decision{}, keyrate.ErrInvalidCost
	case cost > r.limit.Burst:
		return keyrate.Decision{}, keyrate.ErrCostExceedsBurst
	}
	t := r.tokens(key, now)
	allowed := t.Cmp(big.NewRat(int64(cost), 1)) >= 0
	if allowed {
		t = new(big.Rat).Sub(t, big.NewRat(int64(cost), 1))
	}
	r.buckets[key] = &refBucket{tokens: t, last: now}
	return r.decision(t, allowed, cost), nil
}

func (r *reference) Peek(key string, now time.Duration) keyrate.Decision {
	t := r.tokens(key, now)
	return r.decision(t, t.Cmp(big.NewRat(1, 1)) >= 0, 1)
}

// op is one decoded fuzz operation.
type op struct {
	key  string
	cost int // 0 means Peek
	step time.Duration
}

// decode turns fuzz bytes into a limit and operations: 3 bytes of limit,
// then 3 bytes per operation (key and kind, cost, clock step). Steps are
// signed when backwards is set.
func decode(data []byte, backwards bool) (keyrate.Limit, []op, bool) {
	if len(data) < 3 {
		return keyrate.Limit{}, nil, false
	}
	limit := keyrate.Limit{
		Rate:  1 + int(data[0]%20),
		Per:   time.Duration(1+int(data[1]%50)) * 100 * time.Millisecond,
		Burst: 1 + int(data[2]%12),
	}
	var ops []op
	for b := data[3:]; len(b) >= 3; b = b[3:] {
		o := op{key: fmt.Sprint("k", b[0]%4)}
		if b[0]&0x80 == 0 { // AllowN; costs reach one past Burst and 0, to hit both errors
			o.cost = int(b[1]) % (limit.Burst + 2)
			if o.cost == 0 {
				o.cost = -1
			}
		}
		step := time.Duration(b[2]) * 7 * time.Millisecond
		if backwards && b[2]&1 == 1 {
			step = -step / 2
		}
		o.step = step
		ops = append(ops, o)
	}
	return limit, ops, true
}

var seeds = [][]byte{
	{2, 9, 2, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 100, 0x80, 0, 0},
	{0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 1, 255},
	{3, 19, 11, 1, 5, 3, 2, 13, 0, 0x81, 0, 9, 3, 12, 200, 0, 1, 1},
	{17, 29, 5, 0, 6, 1, 0, 7, 0, 0x80, 0, 40, 0, 3, 0},
}

// FuzzDifferential applies random operations to every store and to the
// rational reference on a clock that only moves forwards, and requires the
// same Decision (or error) from all of them at every step. Only limits the
// stores decide exactly (rules.Rule.Exact) are compared.
func FuzzDifferential(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		limit, ops, ok := decode(data, false)
		if !ok {
			return
		}
		if p, err := rules.NewRule(limit, nil); err != nil || !p.Exact() {
			return
		}
		const origin = 5 * time.Hour
		clk := clock.NewManual(origin)
		ref := &reference{limit: limit, buckets: map[string]*refBucket{}}
		limiters := openAll(t, limit, clk)
		for i, o := range ops {
			clk.Advance(o.step)
			now := clk.Now() - origin
			var want keyrate.Decision
			var wantErr error
			if o.cost == 0 {
				want = ref.Peek(o.key, now)
			} else {
				want, wantErr = ref.AllowN(o.key, o.cost, now)
			}
			for j, l := range limiters {
				got, err := apply(l, o)
				if !errors.Is(err, wantErr) || got != want {
					t.Fatalf("limit %v, op %d (%+v) at +%v: store %s = %+v, %v; reference = %+v, %v",
						limit, i, o, now, stores[j].name, got, err, want, wantErr)
				}
			}
		}
	})
}

// FuzzStoresAgree lets the clock step backwards too, where the reference's
// textbook form no longer applies. Every store must keep each key within
// Burst + Rate·T/Per, T being the span of the clock readings so far, at
// every step. The stores must also agree with one another until the clock
// first reads earlier than it has before: from then on a store that has
// evicted a bucket answers for it from its floor (the latest state it has
// evicted, see internal/sweep), which can only deny more than a store that
// kept the bucket, so their decisions may part.
func FuzzStoresAgree(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		limit, ops, ok := decode(data, true)
		if !ok {
			return
		}
		clk := clock.NewManual(time.Hour)
		limiters := openAll(t, limit, clk)
		lo, hi := clk.Now(), clk.Now()
		admitted := make([]map[string]int, len(limiters))
		for j := range admitted {
			admitted[j] = map[string]int{}
		}
		agree := true
		for i, o := range ops {
			now := clk.Advance(o.step)
			agree = agree && now >= hi
			lo, hi = min(lo, now), max(hi, now)
			bound := float64(limit.Burst) + float64(limit.Rate)*float64(hi-lo)/float64(limit.Per)
			var first keyrate.Decision
			var firstErr error
			for j, l := range limiters {
				got, err := apply(l, o)
				if j == 0 {
					first, firstErr = got, err
				} else if agree && (got != first || (err == nil) != (firstErr == nil)) {
					t.Fatalf("op %d (%+v): %s = %+v, %v but %s = %+v, %v",
						i, o, stores[j].name, got, err, stores[0].name, first, firstErr)
				}
				if o.cost > 0 && err == nil && got.Allowed {
					admitted[j][o.key] += o.cost
					if float64(admitted[j][o.key]) > bound {
						t.Fatalf("op %d: %s admitted key %s %d over a span of %v, above the bound %.2f",
							i, stores[j].name, o.key, admitted[j][o.key], hi-lo, bound)
					}
				}
			}
		}
	})
}

func openAll(t *testing.T, limit keyrate.Limit, clk clock.Clock) []keyrate.Limiter {
	t.Helper()
	var ls []keyrate.Limiter
	for _, s := range stores {
		l, err := s.new(limit, keyrate.WithClock(clk))
		if err != nil {
			t.Fatalf("%s.New(%v): %v", s.name, limit, err)
		}
		ls = append(ls, l)
	}
	return ls
}

func apply(l keyrate.Limiter, o op) (keyrate.Decision, error) {
	if o.cost == 0 {
		return l.Peek(o.key), nil
	}
	return l.AllowN(o.key, o.cost)
}

// FuzzStoresAgreeWindows is FuzzStoresAgree for the window algorithms
// (data[2] picks one; the limit is Rate per Per): while the clock only
// moves forwards every store must decide every operation as WindowModel
// does, and at every step, backwards too, no aligned window of any key
// may have admitted more than N at the readings it was admitted at.
func FuzzStoresAgreeWindows(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		limit, ops, ok := decode(data, true)
		if !ok {
			return
		}
		limit = keyrate.Limit{Rate: limit.Rate, Per: limit.Per}.Using(conformance.WindowAlgorithms[int(data[2])%len(conformance.WindowAlgorithms)])
		clk := clock.NewManual(time.Hour)
		limiters := openAll(t, limit, clk)
		models := map[string]*conformance.WindowModel{}
		counted := make([]map[string]map[int64]int, len(limiters)) // store → key → window → admitted
		for j := range counted {
			counted[j] = map[string]map[int64]int{}
		}
		hi, forwards := clk.Now(), true
		for i, o := range ops {
			now := clk.Advance(o.step)
			forwards = forwards && now >= hi
			hi = max(hi, now)
			tick := int64(now - time.Hour)
			m := models[o.key]
			if m == nil {
				m = conformance.NewWindowModel(limit)
				models[o.key] = m
			}
			var want keyrate.Decision
			wantErr := o.cost > limit.Rate || o.cost < 0
			if forwards && !wantErr {
				if o.cost == 0 {
					want = m.Decide(tick, 1, m.Allows(tick, 1))
				} else {
					want = m.Decide(tick, int64(o.cost), m.Take(tick, int64(o.cost)))
				}
				want.Policy, want.Limit = keyrate.DefaultPolicy, limit
			}
			for j, l := range limiters {
				got, err := apply(l, o)
				if (err != nil) != wantErr {
					t.Fatalf("op %d (%+v): %s error %v, want one: %v", i, o, stores[j].name, err, wantErr)
				}
				if forwards && !wantErr && got != want {
					t.Fatalf("op %d (%+v) at tick %d: %s = %+v, model %+v", i, o, tick, stores[j].name, got, want)
				}
				if o.cost > 0 && err == nil && got.Allowed {
					w := tick / int64(limit.Per)
					if counted[j][o.key] == nil {
						counted[j][o.key] = map[int64]int{}
					}
					counted[j][o.key][w] += o.cost
					if n := counted[j][o.key][w]; n > limit.Rate {
						t.Fatalf("op %d: %s admitted %d in window %d of key %s, above %d", i, stores[j].name, n, w, o.key, limit.Rate)
					}
				}
			}
		}
	})
}
