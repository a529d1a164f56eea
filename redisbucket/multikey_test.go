package redisbucket_test

import (
	"errors"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/redisbucket"
	"github.com/keyrate/keyrate/redisbucket/internal/redistest"
)

// TestMultiKey runs keyrate.AllowAll's checks (internal/conformance's
// multikey.go) on a real server and on a Redis Cluster of three masters:
// AllowAll over a Store is the two-step (check every key, then spend each
// with its own script call), so its keys may lie on any masters.
func TestMultiKey(t *testing.T) {
	t.Run("server", func(t *testing.T) { conformance.RunMultiKey(t, openCarry) })
	t.Run("cluster", func(t *testing.T) { conformance.RunMultiKey(t, openClusterCarry) })
}

// openClusterCarry is conformance.OpenCarry on the test binary's shared
// Redis Cluster.
func openClusterCarry(t *testing.T, def keyrate.Limit, policies ...keyrate.Policy) (keyrate.PolicyLimiter, *clock.Manual) {
	clk := clock.NewManual(unixStart)
	s, err := redisbucket.New(newClusterClient(t, redistest.SharedCluster(t)), def, keyrate.WithPolicies(policies...),
		redisbucket.WithTimeSource(clk), redisbucket.WithPrefix(uniquePrefix(t)), redisbucket.WithTimeout(slowTimeout))
	if errors.Is(err, keyrate.ErrUnsupportedAlgorithm) {
		return nil, clk
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}
