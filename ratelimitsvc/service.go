package ratelimitsvc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// Bounds on a request, the defaults of the options that change them.
const (
	// DefaultMaxDescriptors is the most descriptors one request may hold.
	DefaultMaxDescriptors = 64
	// DefaultMaxEntries is the most entries one descriptor may hold.
	DefaultMaxEntries = 16
	// DefaultMaxKeyBytes is the longest a descriptor's key (its domain,
	// entries' keys and values, and their separators) may be: Redis's
	// store takes keys of up to 512 bytes.
	DefaultMaxKeyBytes = 512
	// MaxOverrides is the most distinct limit overrides (a descriptor's
	// "limit" field) the service makes policies for, in its life: past
	// them, a request bearing a new one fails with
	// codes.ResourceExhausted (ErrTooManyOverrides), and Envoy's
	// failure_mode_deny answers it; those made keep deciding.
	MaxOverrides = 256
	// MaxRetiredPolicies is the most policies of rules that a reload
	// dropped (or renamed) the store keeps beside the config's own, so
	// that keys counted under them carry what they spent to the rule they
	// match next. Past it, a new rule takes over a retired policy's name
	// (the store cannot drop a policy): its keys are carried to the new
	// rule's limits, and keyrate's own metrics name the rule by the
	// retired name.
	MaxRetiredPolicies = 256
)

// ContextStore is a store whose calls take a context, as redisbucket's
// do: the Service calls it with the RPC's context, so that a store call
// ends when the RPC does.
type ContextStore interface {
	AllowTierContext(ctx context.Context, key string, tier keyrate.Tier, cost int) (keyrate.Decision, error)
	PeekTierContext(ctx context.Context, key string, tier keyrate.Tier) (keyrate.Decision, error)
	RefundTierContext(ctx context.Context, key string, tier keyrate.Tier, cost int) error
}

// Service is Envoy's rate-limit service (envoy.service.ratelimit.v3.
// RateLimitService) deciding with a keyrate store, under a config in
// envoyproxy/ratelimit's format. Each rule of the config is a policy of
// the store, named by the rule's path; each descriptor of a request is a
// key (its domain and entries), decided under the policy of the rule it
// matches, all windows or none. Reload swaps the config while requests
// are in flight. A Service is safe for concurrent use.
type Service struct {
	rlspb.UnimplementedRateLimitServiceServer

	store    keyrate.PolicyLimiter
	ctxStore ContextStore // store as a ContextStore, or nil
	o        options
	m        *metrics

	state atomic.Pointer[state]
	mu    sync.Mutex // serialises Reload and the making of override policies
	// overrides holds the compiled override rules, by overrideKey.
	overrides sync.Map
	nOverride atomic.Int64
	// names maps the policy name of each limited rule in force (see
	// Rule.Policy) to the store's policy deciding it: the same name,
	// unless the rule took over a retired policy (MaxRetiredPolicies).
	// overrideNames holds the overrides' policies. Both under mu.
	names         map[string]string
	overrideNames map[string]bool
}

// state is a config compiled for the store: every rule's tier.
type state struct {
	cfg   *Config
	rules map[*Rule]*compiled
}

// compiled is a rule ready to decide: its tier, its windows as Envoy's
// RateLimit messages, and its metrics.
type compiled struct {
	rule    *Rule
	tier    keyrate.Tier
	limits  []*rlspb.RateLimitResponse_RateLimit
	maxCost int  // the smallest Burst of the rule's windows
	deny    bool // a window of 0 requests per unit
	shown   int  // the window a status names unless the store says: the 0 one, or the first
	ctr     *counters
}

// options are what the Options resolve to.
type options struct {
	clock          clock.Clock
	maxDescriptors int
	maxEntries     int
	maxKeyBytes    int
	shadow         bool
	headers        *Headers
	validate       func([]keyrate.Policy) error
}

// Option configures a Service.
type Option func(*options) error

// WithClock sets the clock the service reads to tell how long a window
// has left when it answers without the store (a rule of 0 requests per
// unit, a hits_addend above the limit). Its readings must count from an
// instant that is a whole number of every unit's length after the Unix
// epoch, as the store's windows do: NewLocalStore returns such a clock.
// The default reads the wall clock's time since the Unix epoch, as
// redisbucket's windows are aligned.
func WithClock(c clock.Clock) Option {
	return func(o *options) error {
		if c == nil {
			return fmt.Errorf("%w: ratelimitsvc.WithClock(nil)", keyrate.ErrInvalidOption)
		}
		o.clock = c
		return nil
	}
}

// WithLimits bounds each request: at most descriptors descriptors, each
// of at most entries entries and a key of at most keyBytes bytes (see
// DefaultMaxDescriptors, DefaultMaxEntries, DefaultMaxKeyBytes, the
// defaults). A request beyond a bound fails with codes.InvalidArgument,
// its message naming the value and the bound. Each bound must be at
// least 1.
func WithLimits(descriptors, entries, keyBytes int) Option {
	return func(o *options) error {
		if descriptors < 1 || entries < 1 || keyBytes < 1 {
			return fmt.Errorf("%w: ratelimitsvc.WithLimits(%d, %d, %d): every bound must be at least 1", keyrate.ErrInvalidOption, descriptors, entries, keyBytes)
		}
		o.maxDescriptors, o.maxEntries, o.maxKeyBytes = descriptors, entries, keyBytes
		return nil
	}
}

// WithShadowMode turns on the global shadow mode, as envoyproxy/ratelimit's
// SHADOW_MODE does: every request is decided as usual, but its overall
// code is always OK. The default is off.
func WithShadowMode() Option {
	return func(o *options) error { o.shadow = true; return nil }
}

// Headers names the response headers WithHeaders adds.
type Headers struct {
	Limit, Remaining, Reset string
}

// DefaultHeaders are the names Envoy's own rate-limit filter gives these
// headers (enable_x_ratelimit_headers: DRAFT_VERSION_03).
var DefaultHeaders = Headers{Limit: "X-RateLimit-Limit", Remaining: "X-RateLimit-Remaining", Reset: "X-RateLimit-Reset"}

// WithHeaders makes every response carry three headers for Envoy to add
// to its response, as envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED
// does: the limit (requests per unit), the remaining requests and the
// seconds until the window resets, of the descriptor closest to its limit
// (or of one over it). A zero field of h takes DefaultHeaders' name. The
// default is no headers.
func WithHeaders(h Headers) Option {
	return func(o *options) error {
		if h.Limit == "" {
			h.Limit = DefaultHeaders.Limit
		}
		if h.Remaining == "" {
			h.Remaining = DefaultHeaders.Remaining
		}
		if h.Reset == "" {
			h.Reset = DefaultHeaders.Reset
		}
		o.headers = &h
		return nil
	}
}

// WithValidate sets a function that checks a config's policies before
// Reload applies any of them, so that a config the store would refuse
// half-way (redisbucket refuses some limits that the in-process stores
// take) is refused whole. The default checks nothing beyond
// keyrate.Policy.Validate; a store's SetPolicy that fails anyway makes
// Reload put back the policies it changed.
func WithValidate(f func([]keyrate.Policy) error) Option {
	return func(o *options) error { o.validate = f; return nil }
}

// New returns a Service deciding with store under cfg. store's policies
// are the Service's to manage: it adds one per rule of cfg (see Reload).
// It returns an error wrapping keyrate.ErrInvalidOption for a bad
// option, or Reload's error.
func New(store keyrate.PolicyLimiter, cfg *Config, opts ...Option) (*Service, error) {
	if store == nil || cfg == nil {
		return nil, fmt.Errorf("%w: ratelimitsvc.New needs a store and a config", keyrate.ErrInvalidOption)
	}
	s := &Service{store: store, m: newMetrics(), o: options{
		clock:          wallClock{},
		maxDescriptors: DefaultMaxDescriptors,
		maxEntries:     DefaultMaxEntries,
		maxKeyBytes:    DefaultMaxKeyBytes,
	}}
	s.ctxStore, _ = store.(ContextStore)
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&s.o); err != nil {
			return nil, err
		}
	}
	if err := s.Reload(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Register registers s on a gRPC server.
func (s *Service) Register(r grpc.ServiceRegistrar) { rlspb.RegisterRateLimitServiceServer(r, s) }

// Collector returns the service's own Prometheus metrics: decisions per
// domain, descriptor and code, shadow-mode answers, hits, descriptors
// without a rule, requests by overall code or error, backend errors and
// config reloads. (The store's own metrics come from keyrateprom.)
func (s *Service) Collector() prometheus.Collector { return s.m }

// Config returns the config in force.
func (s *Service) Config() *Config { return s.state.Load().cfg }

// Reload makes cfg the config in force: it gives the store a policy for
// every limited rule of cfg whose policy is new or changed (SetPolicy,
// so a key whose rule's limits changed keeps what it has spent, carried
// over to the new limits), then swaps the config in; requests in flight
// finish under the config they started with. On an error (a policy the
// WithValidate function or the store refuses: a *ConfigError at the
// rule's file and line, wrapping the refusal) it changes nothing, puts
// back the policies it had changed, and the config in force stays. The
// outcome is counted in keyrate_rls_config_reloads_total.
func (s *Service) Reload(cfg *Config) error {
	err := s.reload(cfg)
	n := 0
	if err == nil {
		n = len(cfg.rules)
	}
	s.m.reloaded(err, n, time.Now())
	return err
}

// ReloadFiles loads the config from paths (see LoadConfig) and reloads
// it; an error loading counts as a failed reload, and the config in
// force stays.
func (s *Service) ReloadFiles(paths ...string) error {
	cfg, err := LoadConfig(paths...)
	if err != nil {
		s.m.reloaded(err, 0, time.Now())
		return err
	}
	return s.Reload(cfg)
}

func (s *Service) reload(cfg *Config) error {
	if cfg == nil {
		return fmt.Errorf("%w: a nil config", ErrInvalidConfig)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	have := map[string]keyrate.Policy{}
	for _, p := range s.store.Policies() {
		have[p.Name] = p
	}
	names := s.storeNames(cfg, have)
	var want []keyrate.Policy
	var of []*Rule // the rule of each of want
	for _, r := range cfg.rules {
		if r.Unlimited || r.denyAll() {
			continue
		}
		p := r.Policy()
		p.Name = names[r.policy]
		want, of = append(want, p), append(of, r)
	}
	if s.o.validate != nil {
		if err := s.o.validate(want); err != nil {
			// Find the rule refused, to name it (the check of the whole
			// config passes, as a rule, on every good reload).
			for i := range want {
				if err := s.o.validate(want[i : i+1]); err != nil {
					return refused(of[i], err)
				}
			}
			return err
		}
	}
	var undo []keyrate.Policy // the policies changed, as they were
	for i, p := range want {
		old, ok := have[p.Name]
		if ok && slices.Equal(old.Limits, p.Limits) && !old.Unlimited {
			continue
		}
		if err := s.store.SetPolicy(p); err != nil {
			for _, u := range undo {
				_ = s.store.SetPolicy(u)
			}
			return refused(of[i], err)
		}
		if ok {
			undo = append(undo, old)
		}
		// A policy the store did not have stays: a store cannot drop
		// one. storeNames bounds how many no rule uses.
	}
	st := &state{cfg: cfg, rules: make(map[*Rule]*compiled, len(cfg.rules))}
	for _, r := range cfg.rules {
		c, err := s.compile(r, names[r.policy])
		if err != nil {
			return err
		}
		st.rules[r] = c
	}
	s.names = names
	old := s.state.Swap(st)
	if old != nil {
		// The series of rules gone: a config renaming rules reload
		// after reload would otherwise grow them without bound.
		kept := map[[2]string]bool{}
		for _, r := range cfg.rules {
			kept[[2]string{r.Domain, r.Path}] = true
		}
		for _, r := range old.cfg.rules {
			if !kept[[2]string{r.Domain, r.Path}] {
				s.m.forget(r.Domain, r.Path)
			}
		}
	}
	return nil
}

// refused is the error of a rule that the store, or the WithValidate
// function, refuses: a *ConfigError at the rule's rate_limit block.
func refused(r *Rule, err error) error {
	return &ConfigError{File: r.File, Line: r.Line, Msg: fmt.Sprintf("rule %s: %v", r.Path, err), Err: err}
}

// storeNames returns the store's policy for each limited rule of cfg, by
// the rule's policy name, given the store's policies (have): a rule in
// force keeps its policy; a new one takes its own name, unless the
// policies no rule would use (retired: the store's, less the default,
// the overrides' and cfg's) would then number more than
// MaxRetiredPolicies: then it takes over one retired before this reload.
// So a reload adds policies only while at most MaxRetiredPolicies and
// those of the config in force are retired. Call with s.mu held.
func (s *Service) storeNames(cfg *Config, have map[string]keyrate.Policy) map[string]string {
	names := map[string]string{}
	taken := map[string]bool{}
	var fresh []*Rule
	for _, r := range cfg.rules {
		if r.Unlimited || r.denyAll() {
			continue
		}
		if n, ok := s.names[r.policy]; ok && !taken[n] {
			names[r.policy], taken[n] = n, true
			continue
		}
		fresh = append(fresh, r)
	}
	// A policy of the config in force is neither taken over nor set to
	// another rule's limits: requests in flight under that config still
	// decide with it.
	inForce := map[string]bool{}
	for _, n := range s.names {
		inForce[n] = true
	}
	for _, r := range fresh {
		n := r.policy
		for i := 2; taken[n] || inForce[n]; i++ {
			// Its name is one a rule took over as retired.
			n = fmt.Sprintf("%s#%d", r.policy, i)
		}
		names[r.policy], taken[n] = n, true
	}
	retired, spare := 0, []string(nil)
	for n := range have {
		if !taken[n] && n != keyrate.DefaultPolicy && !s.overrideNames[n] {
			retired++
			if !inForce[n] {
				spare = append(spare, n)
			}
		}
	}
	slices.Sort(spare)
	for _, r := range fresh {
		if retired <= MaxRetiredPolicies || len(spare) == 0 {
			break
		}
		if _, ok := have[names[r.policy]]; ok {
			continue // not an addition
		}
		delete(taken, names[r.policy])
		names[r.policy], spare = spare[0], spare[1:]
		taken[names[r.policy]] = true
		retired--
	}
	return names
}

// compile resolves r's tier, of the store's policy named name, and
// metrics.
func (s *Service) compile(r *Rule, name string) (*compiled, error) {
	c := &compiled{rule: r, maxCost: math.MaxInt}
	for i, w := range r.Windows {
		if w.RequestsPerUnit == 0 && !c.deny {
			c.deny, c.shown = true, i
		}
		c.limits = append(c.limits, &rlspb.RateLimitResponse_RateLimit{
			Name: r.Name, RequestsPerUnit: w.RequestsPerUnit, Unit: w.Unit,
		})
		if b := w.Limit().Burst; b < c.maxCost {
			c.maxCost = b
		}
	}
	if !r.Unlimited && !c.deny {
		t, err := s.store.Tier(name)
		if err != nil {
			return nil, err
		}
		c.tier = t
	}
	c.ctr = s.m.counters(r.Domain, r.Path)
	return c, nil
}

// decision is one descriptor's way through ShouldRateLimit.
type decision struct {
	c        *compiled
	override *rlv3.RateLimitDescriptor_RateLimitOverride // the descriptor's limit override, or nil
	metric   string
	key      string
	hits     uint64
}

// ShouldRateLimit decides a request's descriptors, each independently,
// as envoyproxy/ratelimit does: a descriptor that matches a rule spends
// its hits from the rule's windows (all of them or none), one that
// matches none is OK, and the overall code is OVER_LIMIT if any
// descriptor is over its limit (for quota_mode rules: if every one of the
// request's quota descriptors is). A request beyond the service's bounds
// fails with codes.InvalidArgument; a store that fails (Redis unavailable
// under FailClosed) fails the whole request with codes.Unavailable, for
// Envoy's failure_mode_deny to answer, but a store that refuses a new key
// (keyrate.ErrStoreFull: at its WithMaxKeys cap) makes that descriptor
// OVER_LIMIT, as the store means it.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	resp, err := s.shouldRateLimit(ctx, req)
	if err != nil {
		kind := "backend"
		switch {
		case errors.Is(err, ErrInvalidRequest):
			kind = "invalid_request"
		case errors.Is(err, ErrTooManyOverrides):
			kind = "overrides"
		}
		s.m.requests.WithLabelValues(kind).Inc()
		return nil, err
	}
	s.m.requests.WithLabelValues(resp.OverallCode.String()).Inc()
	return resp, nil
}

func (s *Service) shouldRateLimit(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	if err := s.check(req); err != nil {
		return nil, &rpcError{code: codes.InvalidArgument, err: err}
	}
	st := s.state.Load()
	descs := req.GetDescriptors()
	ds := make([]decision, len(descs))
	var replaced map[string]bool
	for i, d := range descs {
		m, known := st.cfg.match(req.GetDomain(), d.GetEntries())
		if !known {
			s.m.unmatched.WithLabelValues(labelUnknownDomain).Inc()
			continue
		}
		if o := d.GetLimit(); o != nil {
			// An override is counted under the descriptor's own values,
			// as envoyproxy/ratelimit counts it: no share_threshold. Its
			// policy is made once every descriptor has been checked, so
			// that a refused request makes none.
			if _, err := overrideKeyOf(o); err != nil {
				return nil, err
			}
			ds[i].override, m.shared = o, nil
		} else if m.rule != nil {
			ds[i].c, ds[i].metric = st.rules[m.rule], m.metric
			for _, r := range m.rule.Replaces {
				if replaced == nil {
					replaced = map[string]bool{}
				}
				replaced[r] = true
			}
		}
		if ds[i].c == nil && ds[i].override == nil {
			s.m.unmatched.WithLabelValues(req.GetDomain()).Inc()
			continue
		}
		ds[i].key = descriptorKey(req.GetDomain(), d.GetEntries(), m.shared)
		if n := len(ds[i].key); n > s.o.maxKeyBytes {
			return nil, rpcErrorf(codes.InvalidArgument, "%w: descriptor %d's key (its domain, keys and values) is %d bytes, longer than the %d a key may be", ErrInvalidRequest, i, n, s.o.maxKeyBytes)
		}
		ds[i].hits = uint64(max(1, req.GetHitsAddend()))
		if h := d.GetHitsAddend(); h != nil {
			ds[i].hits = h.GetValue()
		}
	}
	for i := range ds {
		if o := ds[i].override; o != nil {
			c, err := s.override(o)
			if err != nil {
				return nil, err
			}
			ds[i].c, ds[i].metric = c, c.rule.Path
		}
	}
	resp := &rlspb.RateLimitResponse{Statuses: make([]*rlspb.RateLimitResponse_DescriptorStatus, len(descs))}
	var overRate, overQuota, quota int
	var closest *rlspb.RateLimitResponse_DescriptorStatus
	closestLeft := uint32(math.MaxUint32)
	for i := range ds {
		d := &ds[i]
		if d.c != nil && d.c.rule.Name != "" && replaced[d.c.rule.Name] {
			d.c = nil // replaced by another descriptor's rule: not decided
		}
		st, err := s.decide(ctx, d, descs[i].GetIsNegativeHits())
		if err != nil {
			return nil, err
		}
		resp.Statuses[i] = st
		if d.c == nil || d.c.rule.Unlimited {
			continue
		}
		if s.o.headers != nil && st.CurrentLimit != nil && st.LimitRemaining < closestLeft {
			closest, closestLeft = st, st.LimitRemaining
		}
		q := d.c.rule.QuotaMode
		if q {
			quota++
		}
		if st.Code == rlspb.RateLimitResponse_OVER_LIMIT {
			if q {
				overQuota++
			} else {
				overRate++
				closest, closestLeft = st, 0
			}
		}
	}
	resp.OverallCode = rlspb.RateLimitResponse_OK
	if overRate > 0 || (quota > 0 && quota == overQuota) {
		resp.OverallCode = rlspb.RateLimitResponse_OVER_LIMIT
	}
	if s.o.headers != nil && closest != nil {
		resp.ResponseHeadersToAdd = s.headers(closest)
	}
	if resp.OverallCode == rlspb.RateLimitResponse_OVER_LIMIT && s.o.shadow {
		resp.OverallCode = rlspb.RateLimitResponse_OK
		s.m.global.Inc()
	}
	return resp, nil
}

// check enforces the request's bounds.
func (s *Service) check(req *rlspb.RateLimitRequest) error {
	if req.GetDomain() == "" {
		return fmt.Errorf("%w: rate limit domain must not be empty", ErrInvalidRequest)
	}
	descs := req.GetDescriptors()
	if len(descs) == 0 {
		return fmt.Errorf("%w: rate limit descriptor list must not be empty", ErrInvalidRequest)
	}
	if len(descs) > s.o.maxDescriptors {
		return fmt.Errorf("%w: %d descriptors, more than the %d a request may hold", ErrInvalidRequest, len(descs), s.o.maxDescriptors)
	}
	for i, d := range descs {
		if d == nil {
			return fmt.Errorf("%w: descriptor %d is null", ErrInvalidRequest, i)
		}
		es := d.GetEntries()
		if len(es) > s.o.maxEntries {
			return fmt.Errorf("%w: descriptor %d has %d entries, more than the %d a descriptor may hold", ErrInvalidRequest, i, len(es), s.o.maxEntries)
		}
	}
	return nil
}

// decide decides one descriptor and returns its status.
func (s *Service) decide(ctx context.Context, d *decision, negative bool) (*rlspb.RateLimitResponse_DescriptorStatus, error) {
	c := d.c
	if c == nil {
		return &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}, nil
	}
	ctr := c.ctr
	if d.metric != c.rule.Path {
		ctr = s.m.detailedCounters(c.rule.Domain, d.metric)
	}
	if c.rule.Unlimited {
		ctr.ok.Inc()
		ctr.hits.Add(float64(d.hits))
		return &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}, nil
	}
	st := &rlspb.RateLimitResponse_DescriptorStatus{CurrentLimit: c.limits[c.shown]}
	over, decided := true, false
	var dec keyrate.Decision
	var err error
	switch {
	case c.deny:
		// A window of 0 requests per unit: every request is over it.
	case negative:
		// is_negative_hits gives hits back: a refund, capped at what one
		// request could have spent; its status is what the key has then.
		over = false
		if d.hits > 0 {
			err = s.refund(ctx, d.key, c.tier, int(min(d.hits, uint64(c.maxCost))))
		}
		if err == nil {
			dec, err = s.peek(ctx, d.key, c.tier)
			decided = true
		}
	case d.hits == 0:
		// A check: whether one more request would be admitted, spending
		// nothing (a spend and a refund would hand the refund to the next
		// window if one started between them).
		dec, err = s.peek(ctx, d.key, c.tier)
		decided = true
	case d.hits > uint64(c.maxCost):
		// More than the limit holds: over it, whatever the store holds.
	default:
		dec, err = s.allow(ctx, d.key, c.tier, int(d.hits))
		decided = true
	}
	switch {
	case errors.Is(err, keyrate.ErrCostExceedsBurst):
		// A store that holds back part of a Burst (redisbucket's leases)
		// can refuse a cost the config allows: over the limit, nothing
		// spent.
	case errors.Is(err, keyrate.ErrStoreFull):
		// A store at its WithMaxKeys cap fails a new key closed: over
		// the limit, rather than an error that Envoy's
		// failure_mode_deny: false would admit.
		s.m.errors.WithLabelValues(c.rule.Domain, c.rule.Path).Inc()
	case err != nil:
		return nil, s.backendErr(c, d, err)
	case decided:
		over = !dec.Allowed && !negative
		fill(st, c, dec)
		if w := dec.Window; dec.WindowResetAfter == 0 && w >= 0 && w < len(c.rule.Windows) && c.rule.Windows[w].Algorithm == keyrate.FixedWindow {
			// Nothing spent in the window yet (a check or a refund):
			// it still ends where every fixed window of its unit does.
			st.DurationUntilReset = s.untilReset(st.CurrentLimit)
		}
	}
	if over && st.DurationUntilReset == nil {
		st.DurationUntilReset = s.untilReset(c.limits[c.shown])
	}
	ctr.hits.Add(float64(d.hits))
	st.Code = rlspb.RateLimitResponse_OK
	switch {
	case over && c.rule.ShadowMode:
		ctr.shadow.Inc()
		ctr.ok.Inc()
	case over:
		st.Code = rlspb.RateLimitResponse_OVER_LIMIT
		ctr.over.Inc()
	default:
		ctr.ok.Inc()
	}
	return st, nil
}

// fill sets a status's limit, remaining and reset from a decision. A
// denial has 0 remaining, as envoyproxy/ratelimit answers, though a
// request of fewer hits than the denied one may still fit.
func fill(st *rlspb.RateLimitResponse_DescriptorStatus, c *compiled, d keyrate.Decision) {
	if d.Window >= 0 && d.Window < len(c.limits) {
		st.CurrentLimit = c.limits[d.Window]
	}
	if d.Allowed {
		st.LimitRemaining = uint32(min(max(d.Remaining, 0), math.MaxUint32))
	}
	st.DurationUntilReset = durationpb.New(d.WindowResetAfter)
}

func (s *Service) allow(ctx context.Context, key string, tier keyrate.Tier, cost int) (keyrate.Decision, error) {
	if s.ctxStore != nil {
		return s.ctxStore.AllowTierContext(ctx, key, tier, cost)
	}
	return s.store.AllowTier(key, tier, cost)
}

func (s *Service) peek(ctx context.Context, key string, tier keyrate.Tier) (keyrate.Decision, error) {
	if s.ctxStore != nil {
		return s.ctxStore.PeekTierContext(ctx, key, tier)
	}
	return s.store.PeekTier(key, tier)
}

func (s *Service) refund(ctx context.Context, key string, tier keyrate.Tier, cost int) error {
	if s.ctxStore != nil {
		return s.ctxStore.RefundTierContext(ctx, key, tier, cost)
	}
	return s.store.RefundTier(key, tier, cost)
}

// backendErr counts a store's failure and returns the RPC's error.
func (s *Service) backendErr(c *compiled, d *decision, err error) error {
	s.m.errors.WithLabelValues(c.rule.Domain, c.rule.Path).Inc()
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.Unavailable, "rate limit store: %v", err)
}

// untilReset returns the time until the window of l ends, by the
// service's clock.
func (s *Service) untilReset(l *rlspb.RateLimitResponse_RateLimit) *durationpb.Duration {
	w := UnitDuration(l.GetUnit())
	if m := l.GetUnitMultiplier(); m != nil && m.GetValue() > 1 {
		w *= time.Duration(m.GetValue())
	}
	if w <= 0 {
		return nil
	}
	now := s.o.clock.Now()
	return durationpb.New(w - ((now%w)+w)%w)
}

// headers returns the response headers for the descriptor st.
func (s *Service) headers(st *rlspb.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	reset := int64(0)
	if d := st.GetDurationUntilReset(); d != nil {
		reset = int64(math.Ceil(d.AsDuration().Seconds()))
	}
	return []*corev3.HeaderValue{
		{Key: s.o.headers.Limit, Value: strconv.FormatUint(uint64(st.CurrentLimit.GetRequestsPerUnit()), 10)},
		{Key: s.o.headers.Remaining, Value: strconv.FormatUint(uint64(st.LimitRemaining), 10)},
		{Key: s.o.headers.Reset, Value: strconv.FormatInt(reset, 10)},
	}
}

// overrideKey identifies a limit override.
type overrideKey struct {
	rpu, unit, mult uint32
}

// overrideKeyOf returns a limit override's key, or an error for a unit
// the service cannot count in.
func overrideKeyOf(o *rlv3.RateLimitDescriptor_RateLimitOverride) (overrideKey, error) {
	mult := uint32(1)
	if m := o.GetUnitMultiplier(); m != nil && m.GetValue() > 1 {
		mult = m.GetValue()
	}
	u := UnitDuration(Unit(o.GetUnit()))
	if u <= 0 {
		return overrideKey{}, rpcErrorf(codes.InvalidArgument, "%w: limit override of unit %v", ErrInvalidRequest, o.GetUnit())
	}
	if most := uint32(min(math.MaxInt64/int64(u), math.MaxUint32)); mult > most {
		return overrideKey{}, rpcErrorf(codes.InvalidArgument, "%w: limit override unit_multiplier %d of %v: more than the %d a window can be", ErrInvalidRequest, mult, o.GetUnit(), most)
	}
	return overrideKey{o.GetRequestsPerUnit(), uint32(o.GetUnit()), mult}, nil
}

// override returns the compiled rule of a descriptor's limit override,
// making its policy on first use (at most MaxOverrides of them).
func (s *Service) override(o *rlv3.RateLimitDescriptor_RateLimitOverride) (*compiled, error) {
	k, err := overrideKeyOf(o)
	if err != nil {
		return nil, err
	}
	if c, ok := s.overrides.Load(k); ok {
		return c.(*compiled), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.overrides.Load(k); ok {
		return c.(*compiled), nil
	}
	unit, mult := Unit(k.unit), k.mult
	per := UnitDuration(unit) * time.Duration(mult)
	if s.nOverride.Load() >= MaxOverrides {
		return nil, rpcErrorf(codes.ResourceExhausted, "%w: %d distinct overrides already, the most the service makes", ErrTooManyOverrides, MaxOverrides)
	}
	name := fmt.Sprintf("override:%d/%s", k.rpu, strings.ToLower(unit.String()))
	if mult > 1 {
		name = fmt.Sprintf("override:%d/%dx%s", k.rpu, mult, strings.ToLower(unit.String()))
	}
	r := &Rule{Path: name, policy: name, Windows: []Window{{Unit: unit, RequestsPerUnit: k.rpu, Algorithm: keyrate.FixedWindow}}}
	c := &compiled{rule: r, deny: k.rpu == 0, maxCost: int(k.rpu)}
	lim := &rlspb.RateLimitResponse_RateLimit{RequestsPerUnit: k.rpu, Unit: unit}
	if mult > 1 {
		lim.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	c.limits = []*rlspb.RateLimitResponse_RateLimit{lim}
	if !c.deny {
		p := keyrate.Policy{Name: name, Limits: []keyrate.Limit{keyrate.Limit{Rate: int(k.rpu), Per: per}.Using(keyrate.FixedWindow)}}
		err := p.Validate()
		if err == nil && s.o.validate != nil {
			err = s.o.validate([]keyrate.Policy{p})
		}
		if err == nil {
			err = s.store.SetPolicy(p)
		}
		if err != nil {
			return nil, rpcErrorf(codes.InvalidArgument, "%w: limit override %d per %v: %w", ErrInvalidRequest, k.rpu, per, err)
		}
		if c.tier, err = s.store.Tier(name); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	c.ctr = s.m.counters(labelOverride, name)
	if s.overrideNames == nil {
		s.overrideNames = map[string]bool{}
	}
	s.overrideNames[name] = true
	s.overrides.Store(k, c)
	s.nOverride.Add(1)
	return c, nil
}

// labelOverride is the domain label of overrides' metrics.
const labelOverride = "(override)"

// descriptorKey is the store key of a descriptor: its domain and entries,
// with '\', '|' and '=' escaped so that two descriptors never share a key.
// An entry whose value a share_threshold wildcard matched is keyed by the
// wildcard, so that every value it matches shares one key.
func descriptorKey(domain string, entries []*rlv3.RateLimitDescriptor_Entry, shared []string) string {
	var b strings.Builder
	escape(&b, domain)
	for i, e := range entries {
		b.WriteByte('|')
		escape(&b, e.GetKey())
		b.WriteByte('=')
		v := e.GetValue()
		if i < len(shared) && shared[i] != "" {
			v = shared[i]
		}
		escape(&b, v)
	}
	return b.String()
}

func escape(b *strings.Builder, s string) {
	if !strings.ContainsAny(s, `\|=`) {
		b.WriteString(s)
		return
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '|' || c == '=' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
}

// wallClock reads the wall clock's time since the Unix epoch.
type wallClock struct{}

func (wallClock) Now() time.Duration { return time.Duration(time.Now().UnixNano()) }
