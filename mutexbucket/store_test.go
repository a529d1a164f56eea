package mutexbucket_test

import (
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/mutexbucket"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Store{
		New: func(t *testing.T, limit keyrate.Limit, clk *clock.Manual) (keyrate.Limiter, error) {
			s, err := mutexbucket.New(limit, keyrate.WithClock(clk))
			if err != nil {
				return nil, err // a typed nil *Store would not compare equal to nil
			}
			return s, nil
		},
	})
}
