package redisbucket_test

import (
	"strings"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/redisbucket"
)

func TestConformance(t *testing.T) {
	srv := server(t)
	client := newClient(t, srv.Addr())
	conformance.Run(t, conformance.Store{
		Remote: true,
		New: func(t *testing.T, limit keyrate.Limit, clk *clock.Manual) (keyrate.Limiter, error) {
			// Two of the suite's tests cannot apply as they stand; each
			// is run in this package's own form instead.
			switch name := t.Name(); {
			case strings.HasSuffix(name, "/IndependentKeys"):
				t.Skip("uses the empty key, which redisbucket rejects with ErrInvalidKey; see TestIndependentKeys")
			case strings.HasSuffix(name, "/FractionalRate"):
				t.Skip("steps the clock at sub-µs offsets, below the script's µs clock; see TestDifferential")
			}
			s, err := redisbucket.New(client, limit,
				redisbucket.WithTimeSource(clk),
				redisbucket.WithPrefix(uniquePrefix(t)),
				redisbucket.WithTimeout(slowTimeout))
			if err != nil {
				return nil, err // a typed nil *Store would not compare equal to nil
			}
			return s, nil
		},
	})
}
