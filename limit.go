package keyrate

import (
	"fmt"
	"time"

	"github.com/keyrate/keyrate/internal/tick"
)

// Limit is a token-bucket limit by default: Rate tokens are added every
// Per, up to a capacity of Burst tokens. A request of cost c is allowed
// when the bucket holds at least c tokens, and spends them.
//
// Over any interval of length T a key is allowed at most
// Burst + Rate·T/Per tokens in total.
//
// With Algorithm set to a window algorithm (see Algorithm and Using), the
// limit is Rate per window of length Per instead, and Burst equals Rate.
//
// The zero Limit is invalid; build one with PerSecond, PerMinute, PerHour or
// Every, optionally followed by WithBurst or Using.
type Limit struct {
	// Rate is the number of tokens added every Per. At least 1.
	Rate int
	// Per is the period over which Rate tokens are added. At least 1ns.
	Per time.Duration
	// Burst is the bucket's capacity: the most tokens a key can spend at
	// once after being idle. At least 1. A window algorithm's Burst must
	// equal Rate.
	Burst int
	// Algorithm is how requests are counted. The zero value is
	// TokenBucket.
	Algorithm Algorithm
}

// PerSecond returns a limit of n tokens per second with a burst of n.
func PerSecond(n int) Limit { return Limit{Rate: n, Per: time.Second, Burst: n} }

// PerMinute returns a limit of n tokens per minute with a burst of n.
func PerMinute(n int) Limit { return Limit{Rate: n, Per: time.Minute, Burst: n} }

// PerHour returns a limit of n tokens per hour with a burst of n.
func PerHour(n int) Limit { return Limit{Rate: n, Per: time.Hour, Burst: n} }

// Every returns a limit of one token every d with a burst of 1.
func Every(d time.Duration) Limit { return Limit{Rate: 1, Per: d, Burst: 1} }

// WithBurst returns a copy of l with its Burst set to b.
func (l Limit) WithBurst(b int) Limit {
	l.Burst = b
	return l
}

// Validate reports whether l can be enforced: it returns nil, or an error
// wrapping ErrInvalidLimit that names the offending value and its bound.
func (l Limit) Validate() error {
	_, err := l.unit()
	return err
}

// unit validates l and works out its tick unit.
func (l Limit) unit() (tick.Unit, error) {
	u, err := tick.Compile(tick.Spec{Rate: l.Rate, Per: l.Per, Burst: l.Burst, Alg: uint8(l.Algorithm), Name: l.Algorithm.String()})
	if err != nil {
		return tick.Unit{}, fmt.Errorf("%w: %v", ErrInvalidLimit, err)
	}
	return u, nil
}

// FillTime returns how long an empty bucket takes to fill in a store,
// rounded up to a whole nanosecond: a key idle that long is back to a full
// bucket. For a limit enforced exactly (see "Time unit and exactness" in
// the package documentation) it is Burst·Per/Rate; for any other the store
// rounds the token interval up, so it is a little longer (PerSecond(17):
// 1.00000001s). Under a window algorithm it is how long a key idle from
// the start of a window takes to have no requests counted: 2·Per, as a
// window's count weighs on the next (the sliding window's estimate, and
// the fixed window's state carried to another limit: see PolicyLimiter).
// It is 0 for a limit that Validate rejects.
func (l Limit) FillTime() time.Duration {
	u, err := l.unit()
	if err != nil {
		return 0
	}
	return u.FillTime()
}

// String returns the limit in the form "3 per 1m0s, burst 3", or for a
// window algorithm "3 per 1m0s, fixed-window".
func (l Limit) String() string {
	if l.Algorithm != TokenBucket {
		if l.Burst != l.Rate {
			return fmt.Sprintf("%d per %v, %v, burst %d", l.Rate, l.Per, l.Algorithm, l.Burst)
		}
		return fmt.Sprintf("%d per %v, %v", l.Rate, l.Per, l.Algorithm)
	}
	return fmt.Sprintf("%d per %v, burst %d", l.Rate, l.Per, l.Burst)
}

// MaxScale is the most ticks per nanosecond a store counts a limit's time
// in (see the package documentation's "Time unit and exactness"): a limit
// whose Per/Rate in lowest terms has a denominator of at most MaxScale is
// enforced exactly, and every store's clock range is over ten years.
const MaxScale = 14

// MaxScale is the scale internal/tick compiles limits with.
const _ = uint(MaxScale-tick.MaxScale) + uint(tick.MaxScale-MaxScale)
