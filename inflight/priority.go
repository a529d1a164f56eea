package inflight

import (
	"context"
	"fmt"

	"github.com/keyrate/keyrate"
)

// Option configures a Store.
type Option func(*Store) error

// WithReserved keeps r of each key's n slots for critical acquires
// (TryAcquireCritical, or a context marked by Critical): an acquire that
// is not critical is refused once n-r slots are held, a critical one only
// at n, so that when a client is at its cap the requests that matter most
// still get through. The default is 0: every acquire may take any slot.
// New returns an error wrapping keyrate.ErrInvalidOption unless 0 <= r <
// n.
func WithReserved(r int) Option {
	return func(s *Store) error {
		if r < 0 || int64(r) >= s.n {
			return fmt.Errorf("%w: inflight.WithReserved(%d): not in [0, %d), the limit", keyrate.ErrInvalidOption, r, s.n)
		}
		s.open = s.n - int64(r)
		return nil
	}
}

// criticalKey is the context key of Critical's mark.
type criticalKey struct{}

// Critical returns a copy of ctx that marks an acquire critical: the
// middleware's (httplimit, grpclimit) TryAcquireContext and Acquire with
// it may take the slots WithReserved keeps. Mark a request in a
// middleware before the limiter's, from what authenticated it. A nil ctx
// is context.Background().
func Critical(ctx context.Context) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithValue(ctx, criticalKey{}, true)
}

// IsCritical reports whether ctx was marked by Critical; it is false for
// a nil ctx.
func IsCritical(ctx context.Context) bool {
	if ctx == nil {
		return false
	}
	v, _ := ctx.Value(criticalKey{}).(bool)
	return v
}

// Reserved returns the slots of each key WithReserved keeps for critical
// acquires: 0 without it.
func (s *Store) Reserved() int { return int(s.n - s.open) }

// TryAcquireCritical is TryAcquire for a critical request: it may take
// the slots WithReserved keeps.
func (s *Store) TryAcquireCritical(key string) (Slot, error) {
	return s.tryAcquire(key, s.n)
}

// limitFor returns the slots an acquire under ctx may fill.
func (s *Store) limitFor(ctx context.Context) int64 {
	if s.open != s.n && ctx != nil && IsCritical(ctx) {
		return s.n
	}
	return s.open
}
