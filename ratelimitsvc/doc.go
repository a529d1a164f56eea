// Package ratelimitsvc is Envoy's rate-limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) deciding
// with a keyrate store, under a config in envoyproxy/ratelimit's YAML
// format, read unchanged. The command keyrate-rls (cmd/keyrate-rls) serves
// it; this package is for embedding it in a server of your own.
//
//	cfg, err := ratelimitsvc.LoadConfig("/etc/ratelimit/config")
//	store, clk, err := ratelimitsvc.NewLocalStore()
//	svc, err := ratelimitsvc.New(store, cfg, ratelimitsvc.WithClock(clk))
//	srv := grpc.NewServer()
//	svc.Register(srv)
//
// # The mapping
//
// Each rate_limit block of the config is a Rule, and a keyrate.Policy of
// the store named by the rule's path ("domain.key_value.key", with a '.'
// or '\' inside a key or value escaped by a '\'): by default
// one window, Limit{Rate: requests_per_unit, Per: unit} counted with
// keyrate.FixedWindow, windows aligned to the Unix epoch, as
// envoyproxy/ratelimit counts, so the two decide alike. keyrate's own
// fields in a rate_limit block (algorithm, burst, windows) pick another
// algorithm and add windows. Each descriptor of a request is a key — its
// domain and entries — matched to a rule as envoyproxy/ratelimit matches
// it (key_value, then wildcards, then key, at each level; a rule applies
// where its path ends at the descriptor's last entry), and decided under
// that rule's policy with the store's AllowTier: all windows or none.
//
// # Where it differs from envoyproxy/ratelimit
//
// A denied descriptor spends nothing, where envoyproxy/ratelimit counts the
// hits of a denied request too: with one hit a request the two agree
// (a denied request finds the window full either way), but after a request
// of several hits is refused, a smaller one still fits here (the refused
// one's status says 0 remaining in both, as Envoy expects of a descriptor
// over its limit). A check (hits_addend 0) answers whether one more hit
// would fit, so a full window is OVER_LIMIT (envoyproxy/ratelimit says OK
// until the count exceeds the limit). The differential tests run
// envoyproxy/ratelimit itself beside this package to show both.
//
// Envoy's API has more than envoyproxy/ratelimit reads, and this package
// follows the API: a descriptor's is_negative_hits gives its hits back (a
// keyrate refund, at most a limit's worth a request; envoyproxy/ratelimit
// ignores the flag and counts the hits), and a limit override's
// unit_multiplier lengthens its window (envoyproxy/ratelimit ignores it).
// The in-process store (NewLocalStore) starts a year's windows every 365
// days from a multiple of 210 days since the Unix epoch, not from the
// epoch. envoyproxy/ratelimit's global quota mode, its merging of one
// domain's files, and its response dynamic metadata (a descriptor's
// metadata is read, and not sent) are not offered.
//
// # Reload
//
// Reload swaps the config in while requests are in flight; a rule whose
// limits changed is SetPolicy'd, so its keys carry what they spent (see
// keyrate.PolicyLimiter), and a key that now matches another rule carries
// it there too. A store cannot drop a policy, so the policies of rules a
// reload removed or renamed stay, for their keys to carry from, up to
// MaxRetiredPolicies of them; past it a new rule takes a retired one
// over. A config that fails to load or that the store refuses changes
// nothing. Watch reloads on file changes and on a trigger.
package ratelimitsvc
