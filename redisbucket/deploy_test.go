package redisbucket_test

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/redisbucket"
)

// A rolling deploy that changes the default limit: processes started
// with different limits given to New share the keys of their default
// policy. Each key's value records the limits it was written under, so
// a process reads a value of another default as a change of policy and
// carries it over, as an in-process store carries a key moved to another
// tier (issue 31, item 3).

// sharedDefaults returns two stores on one server, one prefix and one
// frozen time source, with old and new as the limit each gives New, and
// the second's errors passed to OnError.
func sharedDefaults(t *testing.T, old, new keyrate.Limit) (s1, s2 *redisbucket.Store, clk *clock.Manual, reported func() []error) {
	t.Helper()
	srv := server(t)
	clk = clock.NewManual(start)
	prefix := uniquePrefix(t)
	var mu sync.Mutex
	var errs []error
	opts := []keyrate.Option{redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout)}
	s1 = mustNew(t, newClient(t, srv.Addr()), old, opts...)
	s2 = mustNew(t, newClient(t, srv.Addr()), new, append(opts, redisbucket.WithOnError(func(err error) {
		if errors.Is(err, redisbucket.ErrPolicyUnchecked) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}))...)
	return s1, s2, clk, func() []error {
		mu.Lock()
		defer mu.Unlock()
		return errs
	}
}

// allowAll calls s.AllowN(key, 1) n times and returns how many it admitted.
func allowAll(t *testing.T, s *redisbucket.Store, key string, n int) int {
	t.Helper()
	admitted := 0
	for range n {
		d, err := s.AllowN(key, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	return admitted
}

// TestDefaultChangeCarries: two stores with different New-time defaults on
// one key, at one instant. A store reads the other's value as a change of
// policy and carries it, as a tier move does in process: the tokens spent
// under the old default are owed under the new one.
func TestDefaultChangeCarries(t *testing.T) {
	t.Run("burst-kept/rate-lowered", func(t *testing.T) {
		// 10 a second, then 1 a second with the same burst: the 10 spent
		// are owed, so nothing is left at that instant (in process, a
		// tier move admits 0).
		s1, s2, _, _ := sharedDefaults(t, keyrate.PerSecond(10), keyrate.PerSecond(1).WithBurst(10))
		if got := allowAll(t, s1, "k", 20); got != 10 {
			t.Fatalf("the first store admitted %d of 20; want its burst of 10", got)
		}
		if got := allowAll(t, s2, "k", 20); got != 0 {
			t.Fatalf("the second store, its default 1 a second with a burst of 10, admitted %d more at the same instant; want 0 (%d in all against bursts of 10)", got, 10+got)
		}
		if got := allowAll(t, s1, "k", 20); got != 0 {
			t.Fatalf("back on the first store, %d more admitted at the same instant; want 0", got)
		}
	})
	t.Run("rate-raised", func(t *testing.T) {
		// 1 a second with a burst of 10, then 10 a second: the 10 tokens
		// owed refill at the new rate, so the next comes in 100ms.
		s1, s2, clk, _ := sharedDefaults(t, keyrate.PerSecond(1).WithBurst(10), keyrate.PerSecond(10))
		if got := allowAll(t, s1, "k", 10); got != 10 {
			t.Fatalf("the first store admitted %d of 10", got)
		}
		d, err := s2.AllowN("k", 1)
		if err != nil || d.Allowed || d.RetryAfter != 100*time.Millisecond {
			t.Fatalf("under 10 a second, after 10 spent under 1 a second: %+v, %v; want denied, RetryAfter 100ms (the 10 owed refilled at 10 a second)", d, err)
		}
		clk.Advance(100 * time.Millisecond)
		if d, err := s2.AllowN("k", 1); err != nil || !d.Allowed {
			t.Fatalf("100ms later: %+v, %v; want allowed", d, err)
		}
	})
	t.Run("ticks-of-a-third-µs", func(t *testing.T) {
		// 3 in 10s has a token every 3333333⅓µs, so its value holds a third
		// of a µs ("…3333333:1"), which is no value of a limit of whole µs:
		// a store of such a default reads it as the other limit's, carried
		// (1 token owed: denied for a second), not as malformed.
		s1, s2, _, reported := sharedDefaults(t, keyrate.Limit{Rate: 3, Per: 10 * time.Second, Burst: 3}, keyrate.PerSecond(1))
		if d, err := s1.AllowN("k", 1); err != nil || !d.Allowed {
			t.Fatalf("the first store: %+v, %v; want allowed", d, err)
		}
		d, err := s2.AllowN("k", 1)
		if err != nil || d.Allowed || d.RetryAfter != time.Second {
			t.Errorf("under 1 a second, after 1 spent under 3 in 10s: %+v, %v; want denied, RetryAfter 1s (the token owed)", d, err)
		}
		if st := s2.Stats(); st.Malformed != 0 {
			t.Errorf("the second store counted %d malformed values; want none", st.Malformed)
		}
		if errs := reported(); len(errs) != 0 {
			t.Errorf("the second store reported %v; want nothing", errs)
		}
	})
}

// v2Script is the script of the version before values recorded the
// default policy's limits (testdata/gcra-v2.lua).
var v2Script = func() *redis.Script {
	b, err := os.ReadFile("testdata/gcra-v2.lua")
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(b))
}()

// v2 runs the previous version's script as a process whose default is
// base, on key at reading now under its default (the short form it sent
// for that), spending cost (0: peek), and returns its reply: denied (-1
// allowed, or a peek; 0 denied), malformed, and the debt (whole µs,
// ticks, and the in-process remainder).
func v2(t *testing.T, c redis.UniversalClient, key string, base keyrate.Limit, now time.Duration, cost int) []int64 {
	t.Helper()
	_, w := redisbucket.ScriptWindow(base)
	args := append([]any{int64(now / time.Microsecond), cost, time.Hour.Milliseconds()}, w...)
	res, err := v2Script.Run(t.Context(), c, []string{key}, args...).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 5 || res[1] != 0 {
		t.Fatalf("the previous version's reply %v: want 5 values, the value well formed", res)
	}
	return res
}

// TestOldProcessReadsNewValue runs the previous version's script, as a
// process not yet upgraded, on values this version writes for its
// default. A value of the old process's own default it reads as its own;
// one of another default it carries as a change of policy: it never
// admits more than a store of this version would, and never finds a
// value malformed.
func TestOldProcessReadsNewValue(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	for _, c := range []struct {
		name     string
		new, old keyrate.Limit // this version's default, the old process's
		spend    int           // spent by this version at start
		// debt is the debt the old process reads at start, in µs and
		// ticks, and admitted what it admits then of Burst+1 calls.
		debt     [2]int64
		admitted int
	}{
		{"same-default", keyrate.PerSecond(10), keyrate.PerSecond(10), 4, [2]int64{400_000, 0}, 6},
		{"rate-lowered", keyrate.PerSecond(10), keyrate.PerSecond(1).WithBurst(10), 10, [2]int64{10_000_000, 0}, 0},
		{"rate-raised", keyrate.PerSecond(1).WithBurst(10), keyrate.PerSecond(10), 10, [2]int64{1_000_000, 0}, 0},
		{"burst-raised", keyrate.PerSecond(10), keyrate.PerSecond(10).WithBurst(15), 10, [2]int64{1_000_000, 0}, 5},
		{"ticks-of-a-third-µs", keyrate.Limit{Rate: 3, Per: 10 * time.Second, Burst: 3}, keyrate.PerSecond(1), 1, [2]int64{1_000_000, 0}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewManual(start)
			prefix := uniquePrefix(t)
			s := mustNew(t, client, c.new, redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(prefix), redisbucket.WithTimeout(slowTimeout))
			if d, err := s.AllowN("k", c.spend); err != nil || !d.Allowed {
				t.Fatalf("AllowN(%d) = %+v, %v; want allowed", c.spend, d, err)
			}
			v, err := client.Get(t.Context(), prefix+"k").Result()
			if desc, _ := redisbucket.ScriptWindow(c.new); err != nil || !strings.HasPrefix(v, desc+"/") {
				t.Fatalf("the value %q, %v: want it under its limits' descriptor %s", v, err, desc)
			}
			if res := v2(t, client, prefix+"k", c.old, clk.Now(), 0); res[2] != c.debt[0] || res[3] != c.debt[1] || res[4] != 0 {
				t.Fatalf("the old process reads %q as %v; want a debt of %dµs and %d ticks", v, res, c.debt[0], c.debt[1])
			}
			admitted := 0
			for range c.old.Burst + 1 {
				if res := v2(t, client, prefix+"k", c.old, clk.Now(), 1); res[0] == -1 {
					admitted++
				}
			}
			if admitted != c.admitted {
				t.Fatalf("the old process admitted %d of %d at the same instant; want %d", admitted, c.old.Burst+1, c.admitted)
			}
		})
	}
}
