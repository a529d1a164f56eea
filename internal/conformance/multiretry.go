package conformance

import (
	"testing"
	"time"

	"github.com/keyrate/keyrate"
)

// MultiKeyRetryLongest checks the denied decision of an AllowAll whose
// keys are all held by the store and several of which lack their cost:
// it names the short key with the longest wait (the first of those), so
// that the request made again after its RetryAfter is allowed, where the
// first denier's wait would only meet a slower key's deny (and an HTTP
// client's Retry-After with it). A key that holds its cost is left as it
// was, wherever it is in the list.
//
// It runs where the store decides every key of a denied request (an
// in-process store's own path, redisbucket's one script), not on the
// checks in turn, whose PeekTier tells a cost-1 wait only.
func MultiKeyRetryLongest(t *testing.T, m MultiKey) {
	fast := keyrate.Policy{Name: "fast", Limits: []keyrate.Limit{keyrate.PerMinute(60)}} // a token a second
	slow := keyrate.Policy{Name: "slow", Limits: []keyrate.Limit{keyrate.PerMinute(2)}}  // a token in 30s
	pl, clk, tiers := openCarry(t, m.Open, keyrate.PerHour(100), fast, slow)
	ft, st := tiers[0], tiers[1]
	drain := func(key string, tier keyrate.Tier, cost int) {
		t.Helper()
		if d, err := pl.AllowTier(key, tier, cost); err != nil || !d.Allowed {
			t.Fatalf("AllowTier(%q, %d) = %+v, %v; want allowed", key, cost, d, err)
		}
	}
	for _, c := range []struct {
		name  string
		ks    []keyrate.KeyCost
		index int
		retry time.Duration
	}{
		{"fast then slow", []keyrate.KeyCost{{Key: "f", Tier: ft, Cost: 1}, {Key: "s", Tier: st, Cost: 1}}, 1, 30 * time.Second},
		{"slow then fast", []keyrate.KeyCost{{Key: "s", Tier: st, Cost: 1}, {Key: "f", Tier: ft, Cost: 1}}, 0, 30 * time.Second},
		{"spare, fast, slow, spare", []keyrate.KeyCost{{Key: "a", Tier: st, Cost: 1}, {Key: "f", Tier: ft, Cost: 2}, {Key: "s", Tier: st, Cost: 2}, {Key: "b", Tier: ft, Cost: 1}}, 2, time.Minute},
		{"two slow, a tie", []keyrate.KeyCost{{Key: "f", Tier: ft, Cost: 1}, {Key: "s", Tier: st, Cost: 1}, {Key: "s2", Tier: st, Cost: 1}}, 1, 30 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk.Advance(time.Hour) // every key full
			drain("f", ft, 60)
			drain("s", st, 2)
			drain("s2", st, 2)
			drain("a", st, 1) // held, one to spare
			drain("b", ft, 1)
			before := peekAll(t, pl, c.ks)
			d, err := m.allowAll(pl, c.ks)
			if err != nil || d.Allowed || d.Index != c.index || d.RetryAfter != c.retry || d.Remaining != 0 || d.Policy != "slow" {
				t.Fatalf("AllowAll(%v) = %+v, %v; want denied by key %d (slow), 0 left, retry after %v: the longest wait of the short keys", c.ks, d, err, c.index, c.retry)
			}
			if after := peekAll(t, pl, c.ks); !equalDecisions(before, after) {
				t.Fatalf("denied, but the keys went from %+v to %+v", before, after)
			}
			clk.Advance(d.RetryAfter)
			if d, err := m.allowAll(pl, c.ks); err != nil || !d.Allowed {
				t.Fatalf("the request again after its RetryAfter = %+v, %v; want allowed", d, err)
			}
		})
	}
}

func equalDecisions(a, b []keyrate.Decision) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}
