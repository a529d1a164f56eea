package rules

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

func TestCompile(t *testing.T) {
	for _, c := range []struct {
		limit        keyrate.Limit
		scale, ticks uint64 // ticks per ns, ticks per token
		exact        bool
		errHas       string // non-empty: want ErrInvalidLimit with this text
	}{
		{limit: keyrate.PerSecond(10), scale: 1, ticks: 100_000_000, exact: true},
		{limit: keyrate.PerMinute(3), scale: 1, ticks: 20_000_000_000, exact: true},
		{limit: keyrate.Every(2 * time.Second), scale: 1, ticks: 2_000_000_000, exact: true},
		{limit: keyrate.Limit{Rate: 3, Per: 10 * time.Second, Burst: 3}, scale: 3, ticks: 10_000_000_000, exact: true},
		{limit: keyrate.PerSecond(7), scale: 7, ticks: 1_000_000_000, exact: true},
		{limit: keyrate.PerSecond(3_000_000), scale: 3, ticks: 1000, exact: true},
		{limit: keyrate.PerSecond(1_000_000_000), scale: 1, ticks: 1, exact: true},
		// 999983 is prime: the exact scale would be 999983. Coarse: k=1 rounds
		// 1000.017 ticks up to 1001 (0.098% lost), too much; k=6 rounds 6000.10
		// up to 6001 (0.015%), still too much; k=9 rounds 9000.15 up to 9001
		// (0.0094%).
		{limit: keyrate.PerSecond(999_983), scale: 9, ticks: 9001, exact: false},
		{limit: keyrate.PerHour(1).WithBurst(1_000_000), scale: 1, ticks: 3_600_000_000_000, exact: true},
		{limit: keyrate.Limit{Rate: 0, Per: time.Second, Burst: 1}, errHas: "Rate 0 is below 1"},
		{limit: keyrate.Limit{Rate: 1, Per: 0, Burst: 1}, errHas: "Per 0s is below 1ns"},
		{limit: keyrate.Limit{Rate: 1, Per: time.Second, Burst: 0}, errHas: "Burst 0 is below 1"},
		{limit: keyrate.Limit{Rate: 999_999_937, Per: time.Second, Burst: 1}, errHas: "is too fast"},
		{limit: keyrate.Every(24 * time.Hour).WithBurst(1 << 30), errHas: "the most is 53375"},
	} {
		p, err := compile(c.limit)
		if c.errHas != "" {
			if !errors.Is(err, keyrate.ErrInvalidLimit) || !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("compile(%v) error = %v, want ErrInvalidLimit containing %q", c.limit, err, c.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("compile(%v): %v", c.limit, err)
			continue
		}
		if p.scale != c.scale || p.interval != c.ticks || p.exact != c.exact {
			t.Errorf("compile(%v) = scale %d, interval %d, exact %v; want %d, %d, %v",
				c.limit, p.scale, p.interval, p.exact, c.scale, c.ticks, c.exact)
		}
	}
}

func TestLimitConstructors(t *testing.T) {
	for _, c := range []struct {
		got  keyrate.Limit
		want keyrate.Limit
		str  string
	}{
		{keyrate.PerSecond(5), keyrate.Limit{Rate: 5, Per: time.Second, Burst: 5, Algorithm: keyrate.TokenBucket}, "5 per 1s, burst 5"},
		{keyrate.PerMinute(3), keyrate.Limit{Rate: 3, Per: time.Minute, Burst: 3, Algorithm: keyrate.TokenBucket}, "3 per 1m0s, burst 3"},
		{keyrate.PerHour(100).WithBurst(10), keyrate.Limit{Rate: 100, Per: time.Hour, Burst: 10, Algorithm: keyrate.TokenBucket}, "100 per 1h0m0s, burst 10"},
		{keyrate.Every(250 * time.Millisecond), keyrate.Limit{Rate: 1, Per: 250 * time.Millisecond, Burst: 1, Algorithm: keyrate.TokenBucket}, "1 per 250ms, burst 1"},
		{keyrate.PerHour(100).WithBurst(10).Using(keyrate.FixedWindow), keyrate.Limit{Rate: 100, Per: time.Hour, Burst: 100, Algorithm: keyrate.FixedWindow}, "100 per 1h0m0s, fixed-window"},
		{keyrate.PerMinute(7).Using(keyrate.SlidingWindow), keyrate.Limit{Rate: 7, Per: time.Minute, Burst: 7, Algorithm: keyrate.SlidingWindow}, "7 per 1m0s, sliding-window"},
	} {
		if c.got != c.want || c.got.String() != c.str {
			t.Errorf("got %+v %q, want %+v %q", c.got, c.got.String(), c.want, c.str)
		}
		if err := c.got.Validate(); err != nil {
			t.Errorf("%v.Validate() = %v", c.got, err)
		}
	}
	if got := keyrate.PerMinute(3).FillTime(); got != time.Minute {
		t.Errorf("PerMinute(3).FillTime() = %v, want 1m", got)
	}
	if got := (keyrate.Limit{}).FillTime(); got != 0 {
		t.Errorf("Limit{}.FillTime() = %v, want 0", got)
	}
}

// TestTake walks the transition through a table, x/time/rate style.
func TestTake(t *testing.T) {
	p, err := NewRule(keyrate.PerSecond(2), clock.NewManual(0)) // a token every 500ms, burst 2
	if err != nil {
		t.Fatal(err)
	}
	ms := func(n uint64) uint64 { return n * uint64(time.Millisecond) }
	var s State
	for i, st := range []struct {
		now  uint64
		cost int
		ok   bool
		tat  uint64
	}{
		{now: 0, cost: 1, ok: true, tat: ms(500)},
		{now: 0, cost: 1, ok: true, tat: ms(1000)},
		{now: 0, cost: 1, ok: false, tat: ms(1000)},
		{now: ms(499), cost: 1, ok: false, tat: ms(1000)},
		{now: ms(500), cost: 1, ok: true, tat: ms(1500)},
		{now: ms(400), cost: 1, ok: false, tat: ms(1500)}, // stale reading: no tokens minted
		{now: ms(5000), cost: 2, ok: true, tat: ms(6000)}, // idle: capped at burst
		{now: ms(5000), cost: 1, ok: false, tat: ms(6000)},
	} {
		next, ok := p.Take(s, st.now, st.cost)
		if ok != st.ok || uint64(next) != st.tat {
			t.Fatalf("step %d: Take(%d, %d, %d) = %d, %v; want %d, %v", i, s, st.now, st.cost, next, ok, st.tat, st.ok)
		}
		s = next
	}
}

func TestTicksClamp(t *testing.T) {
	clk := clock.NewManual(time.Hour)
	p, err := NewRule(keyrate.PerSecond(7), clk) // scale 7
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   time.Duration
		want uint64
	}{
		{time.Hour, 0},
		{0, 0}, // before the epoch
		{time.Hour + 3, 21},
		{math.MaxInt64, maxTicks / 7 * 7}, // saturates, never wraps
	} {
		if got := p.Ticks(c.at); got != c.want {
			t.Errorf("Ticks(%v) = %d, want %d", c.at, got, c.want)
		}
	}
	clk.Set(time.Hour + time.Second)
	if got := p.Now(); got != 7_000_000_000 {
		t.Errorf("Now() = %d, want 7e9", got)
	}
}

func TestCheckCost(t *testing.T) {
	p, _ := compile(keyrate.PerSecond(5))
	for _, c := range []struct {
		cost int
		want error
		msg  string
	}{
		{1, nil, ""},
		{5, nil, ""},
		{0, keyrate.ErrInvalidCost, "keyrate: invalid cost: cost 0 is below 1"},
		{6, keyrate.ErrCostExceedsBurst, "keyrate: cost exceeds burst: cost 6 is above the burst of 5"},
	} {
		err := p.CheckCost(c.cost)
		if !errors.Is(err, c.want) || (err != nil && err.Error() != c.msg) {
			t.Errorf("CheckCost(%d) = %v, want %v %q", c.cost, err, c.want, c.msg)
		}
	}
}

// FuzzLimitValidate checks that validation never panics, that every
// accepted limit fits the packed state, and that a coarsened limit rounds
// against the client by at most 0.01%.
func FuzzLimitValidate(f *testing.F) {
	f.Add(3, int64(time.Minute), 3)
	f.Add(999_983, int64(time.Second), 1_000_000)
	f.Add(1, int64(24*time.Hour), 1<<30)
	f.Add(0, int64(-1), -1)
	f.Add(math.MaxInt, int64(math.MaxInt64), math.MaxInt)
	f.Fuzz(func(t *testing.T, rate int, per int64, burst int) {
		l := keyrate.Limit{Rate: rate, Per: time.Duration(per), Burst: burst}
		p, err := compile(l)
		if err != nil {
			if !errors.Is(err, keyrate.ErrInvalidLimit) {
				t.Fatalf("compile(%v) error %v does not wrap ErrInvalidLimit", l, err)
			}
			if l.Validate() == nil {
				t.Fatalf("Validate(%v) = nil, compile failed", l)
			}
			return
		}
		if rate < 1 || per < 1 || burst < 1 {
			t.Fatalf("compile accepted %v", l)
		}
		if p.scale < 1 || p.scale > keyrate.MaxScale || p.interval < 1 || p.fill > maxTicks || p.fill != uint64(burst)*p.interval {
			t.Fatalf("compile(%v) = scale %d interval %d fill %d: out of bounds", l, p.scale, p.interval, p.fill)
		}
		// interval·rate against per·scale, in float64 with margin for a relative check.
		want := float64(per) * float64(p.scale) / float64(rate)
		got := float64(p.interval)
		if p.exact && math.Abs(got-want) > want*1e-12 {
			t.Fatalf("%v exact, but interval %v ticks != %v", l, got, want)
		}
		if got < want*(1-1e-12) || got > want*(1+1.0/10_000)*(1+1e-12) {
			t.Fatalf("%v: interval %v ticks, true %v: rounded the wrong way or by more than 0.01%%", l, got, want)
		}
	})
}

// FuzzStateRoundTrip checks that a bucket's packed state decodes to the
// tokens it was encoded from, at any instant in range, and that Take and
// Peek agree with that count.
func FuzzStateRoundTrip(f *testing.F) {
	f.Add(3, int64(time.Minute), 3, uint64(0), 2, 1)
	f.Add(7, int64(time.Second), 1_000_000, uint64(maxTicks), 500_000, 999_999)
	f.Add(1, int64(time.Hour), 1, uint64(12345), 0, 1)
	f.Fuzz(func(t *testing.T, rate int, per int64, burst int, now uint64, tokens, cost int) {
		p, err := compile(keyrate.Limit{Rate: rate, Per: time.Duration(per), Burst: burst})
		if err != nil {
			return
		}
		now %= maxTicks + 1
		tokens = int(uint(tokens) % uint(burst+1))
		s := p.Encode(tokens, now)
		if got := p.Tokens(s, now); got != tokens {
			t.Fatalf("Tokens(Encode(%d, %d)) = %d", tokens, now, got)
		}
		if d := p.Peek(s, now); d.Remaining != tokens || d.Allowed != (tokens >= 1) {
			t.Fatalf("Peek of %d tokens = %+v", tokens, d)
		}
		cost = 1 + int(uint(cost)%uint(burst))
		next, ok := p.Take(s, now, cost)
		if ok != (tokens >= cost) {
			t.Fatalf("Take(cost %d) of %d tokens: ok = %v", cost, tokens, ok)
		}
		want := tokens
		if ok {
			want -= cost
		}
		if got := p.Tokens(next, now); got != want {
			t.Fatalf("after Take(cost %d) of %d tokens: %d left, want %d", cost, tokens, got, want)
		}
		if uint64(next) < uint64(s) {
			t.Fatalf("Take moved the state backwards: %d -> %d", s, next)
		}
		d := p.Decide(next, now, cost, ok)
		if d.Remaining != want || (ok && d.RetryAfter != 0) || (!ok && d.RetryAfter <= 0) {
			t.Fatalf("Decide = %+v, want %d remaining and RetryAfter>0 only on a deny", d, want)
		}
		// Waiting RetryAfter must be enough, and one tick less not.
		if !ok {
			wait := uint64(d.RetryAfter) * p.scale
			if _, ok := p.Take(next, now+wait, cost); !ok {
				t.Fatalf("denied again after waiting RetryAfter %v", d.RetryAfter)
			}
		}
	})
}

func TestRange(t *testing.T) {
	for _, c := range []struct {
		limit keyrate.Limit
		want  time.Duration
	}{
		{keyrate.PerSecond(10), maxTicks},
		{keyrate.PerSecond(7), maxTicks / 7},
	} {
		p, err := NewRule(c.limit, nil)
		if err != nil || p.Range() != c.want {
			t.Errorf("NewRule(%v).Range() = %v, %v; want %v", c.limit, p.Range(), err, c.want)
		}
	}
}

// TestDurationsNeverNegative: the largest debt a bucket can hold, 2^63
// ticks (emptied at the end of the clock range, read with the clock set
// back to the epoch), is longer than a time.Duration at one tick per
// nanosecond. Decide and Peek saturate at the longest duration rather
// than wrap to a negative one.
func TestDurationsNeverNegative(t *testing.T) {
	limit := keyrate.Limit{Rate: 1, Per: 1 << 62, Burst: 1}
	clk := clock.NewManual(0)
	p, err := NewRule(limit, clk)
	if err != nil {
		t.Fatal(err)
	}
	clk.Set(p.Range())
	end := p.Now()
	s, ok := p.Take(0, end, 1)
	if !ok || uint64(s) != 1<<63 {
		t.Fatalf("Take at the end of the range = %d, %v; want 2^63, true", s, ok)
	}
	clk.Set(0)
	now := p.Now()
	for name, d := range map[string]keyrate.Decision{
		"Decide(denied)":  p.Decide(s, now, 1, false),
		"Decide(allowed)": p.Decide(s, now, 1, true),
		"Peek":            p.Peek(s, now),
	} {
		if d.RetryAfter < 0 || d.ResetAfter < 0 {
			t.Errorf("%s = %+v: a negative duration", name, d)
		}
		if d.ResetAfter != math.MaxInt64 {
			t.Errorf("%s.ResetAfter = %v, want the longest duration (saturated)", name, d.ResetAfter)
		}
	}
	if d := p.Decide(s, now, 1, false); d.RetryAfter != math.MaxInt64 {
		t.Errorf("Decide(denied).RetryAfter = %v, want the longest duration (saturated)", d.RetryAfter)
	}
}
