package redisbucket

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/redisbucket/internal/redistest"
)

// TestScriptFastPathAgrees: gcraScript decides the common cases on a fast
// path (one token bucket under base, its value "desc/a:b:0" or, as the
// version before wrote it, "a:b"; one window algorithm's window, its
// value under its descriptor) and everything else on its general path.
// The same state must decide the same way on both. Each case runs the
// fast path on one key for each form of the value, and the general path
// on another holding the same state written so that the fast path does
// not take it (a token bucket's value "desc/a:b:0" sent in the long form
// with base another descriptor; a window's under its descriptor spelt
// with a leading zero, which reads as the same window): random limits,
// states around now, costs (a peek, within and past the burst). The
// replies must be equal, and so must the values an allowed spend writes.
func TestScriptFastPathAgrees(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	r := rand.New(rand.NewPCG(4, 4))
	// fastOnly is gcraSource with its general path cut off: the fast
	// cases run on it, so that each is shown to take the fast path.
	general := "local A = ARGV\n"
	if strings.Count(gcraSource, general) != 1 {
		t.Fatalf("gcraSource has %d lines %q, where the general path begins; want 1", strings.Count(gcraSource, general), general)
	}
	fastOnly := strings.Replace(gcraSource, general, "do return redis.error_reply('the general path') end\n", 1)
	eval := func(t *testing.T, key, value string, args ...any) ([]int64, string) {
		t.Helper()
		if err := c.Set(ctx, key, value, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		src := gcraSource
		if key == "fast" {
			src = fastOnly
		}
		res, err := c.Eval(ctx, src, []string{key}, args...).Int64Slice()
		if err != nil {
			t.Fatalf("EVAL %v on %q: %v", args, value, err)
		}
		after, err := c.Get(ctx, key).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		return res, after
	}
	// state returns a value's state, after its descriptor.
	state := func(v string) string {
		if i := strings.LastIndexByte(v, '/'); i >= 0 {
			v = v[i+1:]
		}
		return v
	}
	const minTTL = "3600000"
	const now0 = int64(1_700_000_000_000_000)

	t.Run("algorithm=token-bucket", func(t *testing.T) {
		limits := []keyrate.Limit{
			keyrate.PerSecond(3).WithBurst(5), keyrate.PerMinute(7).WithBurst(3), keyrate.PerSecond(1000).WithBurst(10),
			keyrate.PerHour(1).WithBurst(1), {Rate: 7, Per: 3 * time.Millisecond, Burst: 4}, keyrate.PerSecond(999_999).WithBurst(100),
		}
		for i := range 300 {
			l := limits[r.IntN(len(limits))]
			u, err := compileUnits(l)
			if err != nil {
				t.Fatal(err)
			}
			k, in, g, f := u.args()
			desc := u.desc()
			now := now0 + r.Int64N(1_000_000_000)
			var a, b int64
			switch r.IntN(4) {
			case 0: // full: a TAT at or before now
				a, b = now-r.Int64N(1_000_000), r.Int64N(k)
			default: // a debt of up to the fill time and a bit more
				d := r.Int64N(f + 2*in)
				a, b = now+d/k, d%k
			}
			cost := r.IntN(l.Burst + 2) // 0: a peek; Burst+1: never allowed
			general, genAfter := eval(t, "general", fmt.Sprintf("%s/%d:%d:0", desc, a, b), now, cost, minTTL, desc, "1:1:1:1", "", k, in, g, f)
			for _, v := range []string{fmt.Sprintf("%s/%d:%d:0", desc, a, b), fmt.Sprintf("%d:%d", a, b)} {
				fast, fastAfter := eval(t, "fast", v, now, cost, minTTL, k, in, g, f, desc)
				if !slices.Equal(fast, general) {
					t.Fatalf("case %d: %v, value %q at now %d, cost %d: the fast path replies %v, the general one %v", i, l, v, now, cost, fast, general)
				}
				if fast[0] == -1 && cost > 0 && fastAfter != genAfter {
					t.Fatalf("case %d: %v, value %q at now %d, cost %d: the fast path writes %q, the general one %q", i, l, v, now, cost, fastAfter, genAfter)
				}
			}
		}
	})

	t.Run("algorithm=window", func(t *testing.T) {
		limits := []keyrate.Limit{
			keyrate.PerSecond(5).Using(keyrate.FixedWindow), keyrate.PerSecond(5).Using(keyrate.SlidingWindow),
			keyrate.PerMinute(100).Using(keyrate.SlidingWindow), {Rate: 3, Per: 7 * time.Millisecond, Burst: 3, Algorithm: keyrate.SlidingWindow},
			keyrate.PerHour(1).Using(keyrate.FixedWindow),
		}
		for i := range 300 {
			l := limits[r.IntN(len(limits))]
			u, err := compileUnits(l)
			if err != nil {
				t.Fatal(err)
			}
			k, w, n, alg := u.args()
			desc := u.desc()
			spelt := fmt.Sprintf("%d:0%d:%d:%d", k, w, n, alg) // the same window
			now := now0 + r.Int64N(10_000_000_000)
			iw := now / w
			idx := iw + []int64{-3, -1, 0, 0, 0, 1, 2}[r.IntN(7)]
			var p int64
			if alg == 2 {
				p = r.Int64N(int64(n) + 1)
			}
			q := r.Int64N(int64(n) + 1)
			cost := r.IntN(l.Rate + 2)
			st := fmt.Sprintf("%d:%d:%d", idx, p, q)
			fast, fastAfter := eval(t, "fast", desc+"/"+st, now, cost, minTTL, desc, "-", "", k, w, n, alg)
			general, genAfter := eval(t, "general", spelt+"/"+st, now, cost, minTTL, desc, "-", "", k, w, n, alg)
			if !slices.Equal(fast, general) {
				t.Fatalf("case %d: %v, state %s at now %d, cost %d: the fast path replies %v, the general one %v", i, l, st, now, cost, fast, general)
			}
			if fast[0] == -1 && cost > 0 && state(fastAfter) != state(genAfter) {
				t.Fatalf("case %d: %v, state %s at now %d, cost %d: the fast path writes %q, the general one %q", i, l, st, now, cost, fastAfter, genAfter)
			}
		}
	})
}
