package keyrateprom_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/keyrateprom"
)

// TestUnknownNamesCannotCrowdOutPolicies: a client whose key names its
// tier (a store's WithPolicyFunc) and that sends MaxPolicies made-up
// names before the store's own policies are first used (after a restart,
// say: 64 requests) does not push those policies into the "other" label:
// the per-policy metrics are what Metrics is for. The made-up names, which
// the store answers with ErrUnknownPolicy, take at most MaxUnknownPolicies
// of the MaxPolicies labels.
func TestUnknownNamesCannotCrowdOutPolicies(t *testing.T) {
	reg, store := keyTierStore(t, keyrate.PerMinute(10), keyrate.WithPolicies(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerMinute(100)}}))

	for i := range keyrateprom.MaxPolicies {
		_, err := store.AllowN(fmt.Sprintf("made-up-%d:mallory", i), 1)
		require.ErrorIs(t, err, keyrate.ErrUnknownPolicy)
	}
	require.True(t, store.Allow("pro:alice"))
	require.True(t, store.Allow(":bob")) // the default policy

	allowed := map[string]float64{}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "keyrate_decisions_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range s.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["decision"] == "allowed" {
				allowed[labels["policy"]] += s.GetCounter().GetValue()
			}
		}
	}
	require.Equal(t, 1.0, allowed["pro"], "pro's decision under its own label; allowed by label: %v", allowed)
	require.Equal(t, 1.0, allowed[keyrate.DefaultPolicy], "the default's under its own")
	require.Zero(t, allowed[keyrateprom.Other])
}
