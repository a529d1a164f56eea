package keyrateprom_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/keyrateprom"
)

// keyTierStore returns a new pedantic registry holding Metrics named
// "api" that observe an atomicbucket store of limit (and opts) whose WithPolicyFunc
// takes each key's policy from the key itself, the part before its first
// ':': a client that chooses its key chooses the policy names Observe gets.
// The store is closed when t ends.
func keyTierStore(t *testing.T, limit keyrate.Limit, opts ...keyrate.Option) (*prometheus.Registry, *atomicbucket.Store) {
	t.Helper()
	m := keyrateprom.New("api")
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(m))
	store, err := atomicbucket.New(limit, append(opts, keyrate.WithObserver(m),
		keyrate.WithPolicyFunc(func(key string) string {
			tier, _, _ := strings.Cut(key, ":")
			return tier
		}))...)
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	return reg, store
}
