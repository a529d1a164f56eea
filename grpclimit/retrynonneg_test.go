package grpclimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/grpclimit"
)

// denyLimiter denies every call with the Decision d.
type denyLimiter struct{ d keyrate.Decision }

func (l denyLimiter) Allow(string) bool                            { return false }
func (l denyLimiter) AllowN(string, int) (keyrate.Decision, error) { return l.d, nil }
func (l denyLimiter) Peek(string) keyrate.Decision                 { return l.d }
func (l denyLimiter) Len() int                                     { return 0 }
func (l denyLimiter) Reserve(string, int, time.Duration) (keyrate.Reservation, error) {
	return keyrate.Reservation{}, nil
}

// TestRetryInfoPositive: a denial whose decision carries a zero or
// negative RetryAfter (a Limiter of the caller's that gets it wrong; no
// keyrate store does) still ends, over a real server, with a RetryInfo
// whose delay is positive, never a negative duration, and a status
// message that names none. (httplimit's Retry-After is likewise never
// below 1.)
func TestRetryInfoPositive(t *testing.T) {
	for _, ra := range []time.Duration{0, -1, -time.Hour} {
		lim := denyLimiter{keyrate.Decision{Allowed: false, Limit: keyrate.PerMinute(1), RetryAfter: ra}}
		in, err := grpclimit.New(lim, grpclimit.ByMetadata("x-api-key"))
		require.NoError(t, err)
		client := serve(t, in)
		st := check(withKey("alice"), client)
		require.Equal(t, codes.ResourceExhausted, st.Code(), "RetryAfter %v: %v", ra, st.Err())
		assert.Greater(t, retryDelay(st), time.Duration(0), "RetryAfter %v: RetryInfo's delay", ra)
		assert.NotContains(t, st.Message(), "-", "RetryAfter %v: message %q", ra, st.Message())
	}
}
