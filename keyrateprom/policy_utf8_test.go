package keyrateprom_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyrate/keyrate"
)

// TestPolicyNameNotUTF8: a policy name that is not valid UTF-8 reaches
// Observe from a store whose WithPolicyFunc derives the name from a
// client's key (the name asked for is the event's Policy, see
// keyrate.Event), and Prometheus refuses such a label value. Observe, and
// so the store's AllowN on the request path, does not panic: the event is
// counted under the name with U+FFFD for the bad byte, and the registry
// still gathers.
func TestPolicyNameNotUTF8(t *testing.T) {
	reg, store := keyTierStore(t, keyrate.PerMinute(1))

	var (
		d        keyrate.Decision
		err      error
		panicked any
	)
	func() {
		defer func() { panicked = recover() }()
		d, err = store.AllowN("\xff:alice", 1) // a client's key, such as a header value
	}()
	require.Nil(t, panicked, "AllowN panicked in the observer")
	require.ErrorIs(t, err, keyrate.ErrUnknownPolicy)
	require.False(t, d.Allowed)

	mfs, err := reg.Gather()
	require.NoError(t, err)
	var unknown float64
	for _, mf := range mfs {
		if mf.GetName() != "keyrate_errors_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range s.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["error"] == "unknown_policy" {
				require.Equal(t, "\uFFFD", labels["policy"])
				unknown += s.GetCounter().GetValue()
			}
		}
	}
	require.Equal(t, 1.0, unknown, "the unknown policy is counted")
}
