package bench

import (
	"time"

	"github.com/puzpuzpuz/xsync/v3"
	"golang.org/x/time/rate"

	"github.com/keyrate/keyrate"
)

// xrate is the hand-written per-key limiter this library replaces: one
// golang.org/x/time/rate.Limiter per key, got or created with one
// xsync.MapOf.LoadOrCompute per call. Its AllowN reports only Allowed (x/time/rate's
// AllowN computes nothing more), so on cost-mix it does less than a store,
// whose Decision carries Remaining and the retry and reset times.
type xrate struct {
	m          *xsync.MapOf[string, *rate.Limiter]
	newLimiter func() *rate.Limiter
	limit      keyrate.Limit
}

func newXrate(l keyrate.Limit) (subject, func(), error) {
	r := rate.Limit(float64(l.Rate) / l.Per.Seconds())
	return &xrate{
		m:          xsync.NewMapOf[string, *rate.Limiter](),
		newLimiter: func() *rate.Limiter { return rate.NewLimiter(r, l.Burst) },
		limit:      l,
	}, func() {}, nil
}

func (x *xrate) get(key string) *rate.Limiter {
	lim, _ := x.m.LoadOrCompute(key, x.newLimiter)
	return lim
}

func (x *xrate) Allow(key string) bool { return x.get(key).Allow() }

func (x *xrate) AllowN(key string, cost int) (keyrate.Decision, error) {
	return keyrate.Decision{Allowed: x.get(key).AllowN(time.Now(), cost), Limit: x.limit}, nil
}

func (x *xrate) Len() int { return x.m.Size() }
