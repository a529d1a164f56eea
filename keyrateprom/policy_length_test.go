package keyrateprom_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/keyrateprom"
)

// TestPolicyLabelLength: the policy label's values are bounded in length
// (MaxPolicyLabel) as well as in number (MaxPolicies): a store whose
// WithPolicyFunc takes a client's key apart hands Observe names as long as
// the client's key (a header of up to 1 MiB), and every series of the
// policy (13) carries the name in each scrape: unbounded, 32 requests with
// 1 MiB keys would make every scrape about 400 MiB of text.
func TestPolicyLabelLength(t *testing.T) {
	reg, store := keyTierStore(t, keyrate.PerMinute(10))

	long := strings.Repeat("t", 1<<20)
	for i := range 4 {
		_, err := store.AllowN(fmt.Sprint(i, long, ":mallory"), 1)
		require.ErrorIs(t, err, keyrate.ErrUnknownPolicy)
	}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	longest, total := 0, 0
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				longest = max(longest, len(lp.GetValue()))
				total += len(lp.GetValue())
			}
		}
	}
	require.Equal(t, keyrateprom.MaxPolicyLabel, longest, "the longest label value, in bytes")
	require.Less(t, total, 64<<10, "the label bytes of a scrape")
}
