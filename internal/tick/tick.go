// Package tick is the time arithmetic that package keyrate and its stores
// share and that needs nothing of keyrate's types: a limit's tick unit
// (how finely its state counts time, and over what range), the wait from
// one clock reading to another, and the longest wait a context allows.
// keyrate's Limit.Validate compiles a limit with it, and so does the
// arithmetic of internal/rules.
package tick

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"time"
)

// Bounds of the packed state; see the keyrate package documentation.
const (
	// MaxTicks bounds both a store's clock reading and a bucket's fill
	// time, in ticks, so that a theoretical arrival time (at most their
	// sum) fits in 63 bits and no addition can wrap.
	MaxTicks = 1 << 62
	// MaxScale is the most ticks per nanosecond a limit uses. It keeps a
	// store's clock range at MaxTicks/MaxScale ns, over ten years.
	MaxScale = 14
	// coarseError bounds the rate a coarsened rule gives up: at most
	// 1/coarseError of it (0.01%).
	coarseError = 10_000
)

// minRange is the least clock range of a window rule, the clock range of
// a token bucket at MaxScale ticks per nanosecond: over ten years.
const minRange = MaxTicks / MaxScale

// maxWindow bounds a window rule's Per, so that two windows past the
// clock range stay below 2^63 ticks.
const maxWindow = MaxTicks / 4

// The algorithms, numbered as keyrate.Algorithm numbers them.
const (
	TokenBucket = iota
	FixedWindow
	SlidingWindow
	SlidingLog
)

// MaxLogRate is the largest Rate of a SlidingLog limit: keyrate.MaxLogRate
// (a test checks they agree).
const MaxLogRate = 1 << 16

// Spec is a limit as keyrate.Limit holds it.
type Spec struct {
	Rate  int
	Per   time.Duration
	Burst int
	Alg   uint8  // TokenBucket, FixedWindow, SlidingWindow or SlidingLog
	Name  string // the algorithm's name, for errors
}

// Unit is a limit's tick unit and packing, as Compile works them out.
type Unit struct {
	Scale    uint64 // ticks per nanosecond
	Interval uint64 // ticks per token: Per·Scale/Rate, exact or rounded up
	Fill     uint64 // ticks to fill an empty bucket: Burst·Interval
	Exact    bool
	MaxNanos time.Duration // clock readings past epoch+MaxNanos saturate
	// A window rule's window (W ticks), limit (N) and count bits.
	Win, N uint64
	CB     uint8
}

// FillTime returns the fill time in nanoseconds, rounded up (and
// saturating at the longest time.Duration).
func (u Unit) FillTime() time.Duration {
	ns := (u.Fill + u.Scale - 1) / u.Scale
	if ns > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// Compile validates l and works out its tick unit. It reads no clock. Its
// errors name the offending value and its bound; keyrate wraps them in
// ErrInvalidLimit.
func Compile(l Spec) (Unit, error) {
	switch {
	case l.Alg > SlidingLog:
		return Unit{}, fmt.Errorf("%s is not one of token-bucket, fixed-window, sliding-window, sliding-log", l.Name)
	case l.Alg == SlidingLog:
		return compileLog(l)
	case l.Alg != TokenBucket:
		return compileWindow(l)
	case l.Rate < 1:
		return Unit{}, fmt.Errorf("Rate %d is below 1", l.Rate)
	case l.Per < 1:
		return Unit{}, fmt.Errorf("Per %v is below 1ns", l.Per)
	case l.Burst < 1:
		return Unit{}, fmt.Errorf("Burst %d is below 1", l.Burst)
	}
	per, rate := uint64(l.Per), uint64(l.Rate)
	var p Unit
	if g := gcd(per, rate); rate/g <= MaxScale {
		// Exact: count time in units of 1/(Rate/g) ns, so that one token is
		// (Per/g) ticks, a whole number.
		p.Scale, p.Interval, p.Exact = rate/g, per/g, true
	} else {
		// Coarse: the least scale whose interval, rounded up (against the
		// client), is within 1/coarseError of the true one.
		for k := uint64(1); k <= MaxScale; k++ {
			hi, lo := bits.Mul64(per, k)
			// hi < rate, since per·k < 2^67 and rate > MaxScale; and r > 0,
			// since rate/g > MaxScale cannot divide k.
			q, r := bits.Div64(hi, lo, rate)
			// The fraction of the rate lost by rounding up is
			// (q+1 - per·k/rate) / (per·k/rate) = (rate-r) / (per·k).
			lostHi, lostLo := bits.Mul64(rate-r, coarseError)
			if hi > lostHi || (hi == lostHi && lo >= lostLo) {
				p.Scale, p.Interval = k, q+1
				break
			}
		}
		if p.Scale == 0 {
			return Unit{}, fmt.Errorf("Rate %d per %v is too fast: a token every %.3gns is below the %dns the state can count within 0.01%%",
				l.Rate, l.Per, float64(per)/float64(rate), coarseError/MaxScale)
		}
	}
	if hi, lo := bits.Mul64(uint64(l.Burst), p.Interval); hi != 0 || lo > MaxTicks {
		maxBurst := MaxTicks / p.Interval
		return Unit{}, fmt.Errorf("Burst %d takes too long to fill at %d per %v: the most is %d",
			l.Burst, l.Rate, l.Per, maxBurst)
	}
	p.Fill = uint64(l.Burst) * p.Interval
	p.MaxNanos = time.Duration(MaxTicks / p.Scale)
	return p, nil
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// compileWindow validates l, a limit of a window algorithm, and works out
// its packing. Ticks are nanoseconds.
func compileWindow(l Spec) (Unit, error) {
	switch {
	case l.Rate < 1:
		return Unit{}, fmt.Errorf("Rate %d is below 1", l.Rate)
	case l.Per < 1:
		return Unit{}, fmt.Errorf("Per %v is below 1ns", l.Per)
	case l.Per > maxWindow:
		return Unit{}, fmt.Errorf("Per %v is above the longest %s window of %v", l.Per, l.Name, time.Duration(maxWindow))
	case l.Burst != l.Rate:
		return Unit{}, fmt.Errorf("Burst %d differs from Rate %d, as a %s limit's cannot (build it with Limit.Using)", l.Burst, l.Rate, l.Name)
	}
	n, w := uint64(l.Rate), uint64(l.Per)
	fields := func(b int) int { return 2 * b } // the counts of a window and the one before it
	span := func(b int) uint64 {               // the clock range with b count bits
		if fields(b) > 60 {
			return 0
		}
		idx := uint64(1)<<(63-fields(b)) - 3 // the last window a reading counts in
		hi, lo := bits.Mul64(idx, w)
		if hi != 0 || lo > MaxTicks {
			return MaxTicks
		}
		return lo
	}
	b := bits.Len64(n)
	if span(b) < minRange {
		most := 0
		for k := b - 1; k > 0; k-- {
			if span(k) >= minRange {
				most = 1<<k - 1
				break
			}
		}
		if most == 0 {
			return Unit{}, fmt.Errorf("Per %v is too short a %s window to count in over ten years", l.Per, l.Name)
		}
		return Unit{}, fmt.Errorf("Rate %d is too many for a %s window of %v: the state counts at most %d in a window that short (over ten years)", l.Rate, l.Name, l.Per, most)
	}
	p := Unit{Scale: 1, Exact: true, Win: w, N: n, CB: uint8(b)}
	p.Fill = 2 * w // the ticks from an empty window's start to a full bucket: its count weighs on the next window
	p.Interval = 1
	p.MaxNanos = time.Duration(span(b))
	return p, nil
}

// compileLog validates l, a SlidingLog limit: one tick a nanosecond, the
// window W and the limit N, and the clock range of a token bucket less W.
func compileLog(l Spec) (Unit, error) {
	switch {
	case l.Rate < 1:
		return Unit{}, fmt.Errorf("Rate %d is below 1", l.Rate)
	case l.Rate > MaxLogRate:
		return Unit{}, fmt.Errorf("Rate %d is above the most of %d a %s limit can count", l.Rate, MaxLogRate, l.Name)
	case l.Per < 1:
		return Unit{}, fmt.Errorf("Per %v is below 1ns", l.Per)
	case l.Per > maxWindow:
		return Unit{}, fmt.Errorf("Per %v is above the longest %s window of %v", l.Per, l.Name, time.Duration(maxWindow))
	case l.Burst != l.Rate:
		return Unit{}, fmt.Errorf("Burst %d differs from Rate %d, as a %s limit's cannot (build it with Limit.Using)", l.Burst, l.Rate, l.Name)
	}
	w := uint64(l.Per)
	return Unit{Scale: 1, Interval: 1, Fill: w, Exact: true, MaxNanos: time.Duration(MaxTicks - w), Win: w, N: uint64(l.Rate)}, nil
}

// Delay returns slot − t, the wait from reading t until reading slot: 0
// if slot is not after t, and the longest duration if the difference
// overflows.
func Delay(slot, t time.Duration) time.Duration {
	if slot <= t {
		return 0
	}
	if d := slot - t; d > 0 {
		return d
	}
	return math.MaxInt64
}

// WaitBudget returns the longest wait ctx allows, the time left until its
// deadline (0 if it has passed) or, without one, no bound; or ctx.Err() if
// ctx is done. A nil ctx is context.Background(). Stores call it in Wait.
func WaitBudget(ctx context.Context) (time.Duration, error) {
	if ctx == nil {
		return math.MaxInt64, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), 0), nil
	}
	return math.MaxInt64, nil
}
