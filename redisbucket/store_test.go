package redisbucket_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/redisbucket"
)

func TestConformance(t *testing.T) {
	for _, b := range backends(t) {
		t.Run("redis="+b.name, func(t *testing.T) { conform(t, b.client(t)) })
	}
}

// conform runs the conformance suite on client's Redis, without and with
// the deny cache.
func conform(t *testing.T, client redis.UniversalClient) {
	for _, c := range []struct {
		name string
		opts []keyrate.Option
	}{
		{"plain", nil},
		{"deny-cache", []keyrate.Option{redisbucket.WithDenyCache(1024)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			conformance.Run(t, conformance.Store{
				Remote:          true,
				RejectsEmptyKey: true,
				Resolution:      time.Microsecond,
				New: func(t *testing.T, limit keyrate.Limit, clk *clock.Manual) (keyrate.Limiter, error) {
					s, err := redisbucket.New(client, limit, append([]keyrate.Option{
						redisbucket.WithTimeSource(clk),
						redisbucket.WithPrefix(uniquePrefix(t)),
						redisbucket.WithTimeout(slowTimeout)}, c.opts...)...)
					if err != nil {
						return nil, err // a typed nil *Store would not compare equal to nil
					}
					return s, nil
				},
			})
		})
	}
}
