package striped_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// churnKeys are the keys FuzzAgreeUnderChurn spends from: every length on
// each side of the table's comparisons (under 8, 8 to 16, over 16, a
// two-byte length, a 1000-byte key), each in variants that differ only in
// the first byte, only in the last, or only past byte 16, so that a
// record compared on too few bytes merges two of them.
var churnKeys = func() []string {
	var keys []string
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 32, 200, 1000} {
		base := strings.Repeat("k", n)
		keys = append(keys, base)
		if n == 0 {
			continue
		}
		keys = append(keys, "x"+base[1:], base[:n-1]+"y")
		if n > 17 {
			keys = append(keys, base[:17]+"z"+base[18:])
		}
	}
	return keys
}()

// churnPolicies are the policies FuzzAgreeUnderChurn moves keys between:
// the default token bucket, two windows, a fixed window and a sliding log.
var churnPolicies = []keyrate.Policy{
	{Name: "two", Limits: []keyrate.Limit{
		{Rate: 2, Per: time.Second, Burst: 3},
		{Rate: 5, Per: 10 * time.Second, Burst: 5},
	}},
	{Name: "fixed", Limits: []keyrate.Limit{keyrate.Limit{Rate: 3, Per: time.Second}.Using(keyrate.FixedWindow)}},
	{Name: "log", Limits: []keyrate.Limit{keyrate.Limit{Rate: 3, Per: time.Second}.Using(keyrate.SlidingLog)}},
}

// FuzzAgreeUnderChurn drives a striped store (1 to 8 stripes, keys kept or
// hashed, with or without a cap of a few keys) and a mutexbucket store
// through one sequence of spends, peeks, reservations (a wait of up to 5 s) and their cancellations, refunds, sweeps, moves of keys
// between policies, changes of a policy, and bursts of short-lived keys
// (which grow the stripes' tables, are refunded full, and are evicted by
// the sampling on insertion, shrinking the tables and compacting the
// arenas), on one clock that only moves forwards. Eviction never changes
// a decision, so the two stores must decide every request alike; a key
// that either store refused as full (their bounded searches for room
// differ) is compared no further.
func FuzzAgreeUnderChurn(f *testing.F) {
	f.Add(byte(0), []byte{0, 3, 1, 0, 3, 1, 7, 40, 0, 4, 30, 0, 3, 0, 0, 0, 3, 1})
	f.Add(byte(5), []byte{0, 20, 2, 5, 20, 1, 0, 20, 1, 7, 90, 0, 4, 9, 0, 0, 20, 1, 3, 0, 0, 0, 20, 2})
	f.Add(byte(10), []byte{0, 1, 1, 0, 2, 1, 0, 5, 1, 0, 9, 1, 0, 13, 1, 0, 17, 1, 0, 21, 1, 7, 30, 0, 0, 25, 1})
	f.Add(byte(3), []byte{5, 6, 3, 0, 6, 1, 0, 6, 1, 0, 6, 1, 0, 6, 1, 6, 1, 0, 0, 6, 1, 4, 50, 0, 0, 6, 1})
	f.Add(byte(12), []byte{0, 30, 1, 0, 31, 1, 0, 32, 1, 0, 33, 1, 0, 34, 1, 0, 35, 1, 0, 36, 1, 0, 37, 1, 4, 200, 0, 0, 38, 1})
	f.Fuzz(func(t *testing.T, cfg byte, data []byte) {
		if len(data) > 300 { // 100 operations: longer inputs only slow the fuzzer and its minimizing
			data = data[:300]
		}
		clk := clock.NewManual(time.Hour)
		policyOf := map[string]string{} // key → policy name; "" is the default
		opts := []keyrate.Option{
			keyrate.WithClock(clk),
			keyrate.WithPolicies(churnPolicies...),
			keyrate.WithPolicyFunc(func(key string) string { return policyOf[key] }),
		}
		if cfg&4 != 0 {
			opts = append(opts, keyrate.WithHashedKeys())
		}
		if cfg&8 != 0 {
			opts = append(opts, keyrate.WithMaxKeys(12))
		}
		limit := keyrate.Limit{Rate: 3, Per: time.Second, Burst: 4}
		st, err := striped.New(limit, append(opts, striped.WithStripes(1<<(cfg&3)))...)
		if err != nil {
			t.Fatal(err)
		}
		mu, err := mutexbucket.New(limit, opts...)
		if err != nil {
			t.Fatal(err)
		}
		gone := map[string]bool{}                       // keys one store refused
		reserved := map[string][2]keyrate.Reservation{} // each key's last reservation: striped's, mutexbucket's
		churn := 0
		decide := func(i int, what, key string, f func(keyrate.PolicyLimiter) (keyrate.Decision, error)) {
			if gone[key] {
				return
			}
			ds, errS := f(st)
			dm, errM := f(mu)
			if errors.Is(errS, keyrate.ErrStoreFull) || errors.Is(errM, keyrate.ErrStoreFull) {
				gone[key] = true
				return
			}
			if ds != dm || (errS == nil) != (errM == nil) {
				t.Fatalf("op %d: %s(key of %d bytes %.20q…, policy %q): striped = %+v, %v; mutexbucket = %+v, %v",
					i, what, len(key), key, policyOf[key], ds, errS, dm, errM)
			}
		}
		for i := 0; i+2 < len(data); i += 3 {
			kind, arg, n := data[i]%8, int(data[i+1]), int(data[i+2])
			key := churnKeys[arg%len(churnKeys)]
			switch kind {
			case 0, 1: // a spend of cost 1 to 3
				cost := n%3 + 1
				decide(i, fmt.Sprint("AllowN cost ", cost), key, func(l keyrate.PolicyLimiter) (keyrate.Decision, error) {
					return l.AllowN(key, cost)
				})
			case 2:
				if n%2 == 0 {
					decide(i, "Peek", key, func(l keyrate.PolicyLimiter) (keyrate.Decision, error) {
						return l.(interface{ Peek(string) keyrate.Decision }).Peek(key), nil
					})
					break
				}
				if gone[key] {
					break
				}
				cost, wait := n%3+1, time.Duration(arg)*20*time.Millisecond
				rs, errS := st.Reserve(key, cost, wait)
				rm, errM := mu.Reserve(key, cost, wait)
				if errors.Is(errS, keyrate.ErrStoreFull) || errors.Is(errM, keyrate.ErrStoreFull) {
					gone[key] = true
					break
				}
				if (errS == nil) != (errM == nil) || rs.OK() != rm.OK() || rs.At() != rm.At() || rs.Delay() != rm.Delay() {
					t.Fatalf("op %d: Reserve(key of %d bytes, policy %q, cost %d, wait %v): striped %v at %v delay %v, %v; mutexbucket %v at %v delay %v, %v",
						i, len(key), policyOf[key], cost, wait, rs.OK(), rs.At(), rs.Delay(), errS, rm.OK(), rm.At(), rm.Delay(), errM)
				}
				reserved[key] = [2]keyrate.Reservation{rs, rm}
			case 3:
				if r, ok := reserved[key]; ok && n%2 == 1 && !gone[key] {
					delete(reserved, key)
					if cs, cm := r[0].Cancel(), r[1].Cancel(); cs != cm {
						t.Fatalf("op %d: Cancel of a reservation of key of %d bytes (policy %q): striped %v, mutexbucket %v", i, len(key), policyOf[key], cs, cm)
					}
					break
				}
				if !gone[key] {
					errS, errM := st.Refund(key, 1), mu.Refund(key, 1)
					if (errS == nil) != (errM == nil) {
						t.Fatalf("op %d: Refund(%.20q…): striped %v, mutexbucket %v", i, key, errS, errM)
					}
				}
			case 4: // the clock moves on: up to about 12 s
				clk.Advance(time.Duration(arg*n+1) * 347 * time.Microsecond)
			case 5: // key moves to another policy
				policyOf[key] = []string{"", "two", "fixed", "log"}[n%4]
			case 6: // a policy changes: its rates and bursts, or its windows and algorithms
				p := churnPolicies[n%len(churnPolicies)]
				p.Limits = append([]keyrate.Limit(nil), p.Limits...)
				if n%8 >= 4 { // a new shape: the keys under it get records of another length
					tb := keyrate.Limit{Rate: arg%4 + 1, Per: time.Second, Burst: arg%5 + 1}
					p.Limits = [][]keyrate.Limit{
						{tb},
						{tb, {Rate: 7, Per: 10 * time.Second, Burst: 7}},
						{keyrate.Limit{Rate: arg%4 + 1, Per: time.Second}.Using(keyrate.SlidingLog)},
						{keyrate.Limit{Rate: arg%4 + 1, Per: time.Second}.Using(keyrate.SlidingWindow), tb, {Rate: 9, Per: time.Minute, Burst: 9}},
					}[arg%4]
				} else if l := p.Limits[0]; l.Algorithm == keyrate.TokenBucket {
					p.Limits[0] = keyrate.Limit{Rate: arg%4 + 1, Per: l.Per, Burst: arg%5 + 1}
				} else {
					p.Limits[0] = keyrate.Limit{Rate: arg%4 + 1, Per: l.Per}.Using(l.Algorithm)
				}
				errS, errM := st.SetPolicy(p), mu.SetPolicy(p)
				if (errS == nil) != (errM == nil) {
					t.Fatalf("op %d: SetPolicy(%v): striped %v, mutexbucket %v", i, p, errS, errM)
				}
			case 7: // a burst of short-lived keys, and maybe a sweep
				for range arg % 64 {
					churn++
					k := fmt.Sprintf("churn-%d-%s", churn, strings.Repeat("c", churn%20))
					decide(i, "AllowN (churn)", k, func(l keyrate.PolicyLimiter) (keyrate.Decision, error) {
						return l.AllowN(k, 1)
					})
					if n%2 == 0 && !gone[k] { // full again: evictable at once
						st.Refund(k, 1)
						mu.Refund(k, 1)
					}
				}
				if n%3 == 0 {
					st.Sweep()
					mu.Sweep()
				}
			}
		}
		// Every key the two stores both track is still decided alike.
		for i, key := range churnKeys {
			decide(1000+i, "Peek (final)", key, func(l keyrate.PolicyLimiter) (keyrate.Decision, error) {
				return l.(interface{ Peek(string) keyrate.Decision }).Peek(key), nil
			})
		}
		if cfg&8 != 0 && (st.Len() > 12 || st.Stats().Keys > 12) {
			t.Fatalf("a store capped at 12 keys holds %d (Stats %d)", st.Len(), st.Stats().Keys)
		}
	})
}
