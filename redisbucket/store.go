package redisbucket

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/isnil"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/wrap"
)

// Store is a keyrate.WaitLimiter whose buckets live in Redis, shared by
// every process that uses the same server (or Cluster), prefix and
// policies.
//
// Each call is one round trip: an EVALSHA of one Lua script (EVAL when the
// server lacks it) on the one key of the bucket, which reads the server's
// TIME and applies the generic cell rate algorithm to every window of the
// key's policy, all or nothing, as the in-process stores do, in integer
// ticks of 1/k µs (see the package documentation). The script runs atomically on
// the server, so concurrent calls from any number of processes never admit
// more than any window allows; the one clock is the server's, so the
// processes' clocks do not matter. A key is deleted by Redis when every
// window is full again. For the same schedule of calls, a Store makes the
// same decisions as the in-process stores, field for field, as long as
// the schedule's times are whole µs: the script returns each window's
// state, and the Store builds the Decision from them as they do.
//
// Policies (keyrate.WithPolicies, keyrate.WithPolicyFunc, SetPolicy) work
// as in the in-process stores: all the windows of a key live in its one
// Redis key, with the limits they are under, so that a key whose policy
// changed, in this process or another, is carried over by the script (see
// keyrate.PolicyLimiter). An unlimited policy answers without a call.
//
// Reserve and Wait (see keyrate.WaitLimiter) are one script call each,
// which reserves the tokens for a slot on the server's clock; Wait then
// sleeps on the store's local clock (clock.System(), or WithTimeSource's),
// sending nothing to Redis until its slot, and Cancel is one more call.
//
// Every call is bounded by the store's timeout (WithTimeout, default
// DefaultTimeout); when Redis fails to answer in time the store's
// FailurePolicy answers instead (WithFailurePolicy, default FailClosed),
// and the failure is counted in Stats.
//
// The limit holds only while Redis keeps every bucket until it is full
// again: New refuses a server whose maxmemory-policy may evict keys (see
// ErrEvictingPolicy and WithEvictionAllowed).
//
// A Store is safe for concurrent use; its concurrency is the client's
// connection pool. Create one with New; the zero value is not usable. The
// Store does not own the client: close the client when done with both.
type Store struct {
	client redis.UniversalClient
	pols   *rules.Policies
	plans  sync.Map // *rules.Rules → *plan, compiled on first use
	// base is window 0 of the default policy New compiled, as a
	// descriptor: a value "a:b" (of the versions before values recorded
	// their default's limits) is read as under it, and a policy of that
	// one window is sent in the script's short form.
	base     string
	baseArg  any // base, boxed once for every call
	set      settings
	fallback *atomicbucket.Store // nil unless the policy is FallbackLocal
	setMu    sync.Mutex          // serialises SetPolicy
	// deadlines bounds each script call by the timeout.
	deadlines *deadlines
	deny      *denyCache // nil without WithDenyCache
	brk       *breakers  // nil without WithBreaker
	counter   *counter   // nil without WithNodeCount
	leases    *leases    // nil without WithLeases
	batch     *batcher   // nil without WithPipelining
	// fleetNodes is the fallback's divisor (WithFallbackNodes,
	// WithNodeCount), written under setMu.
	fleetNodes atomic.Int64

	// policyErr is PolicyCheck's answer: nil, or why New could not check
	// the servers' maxmemory-policy.
	policyErr error

	calls, errs, degraded, malformed, deniedLocally atomic.Uint64
	leasesTaken, leased                             atomic.Uint64
}

var (
	_ keyrate.Limiter       = (*Store)(nil)
	_ keyrate.PolicyLimiter = (*Store)(nil)
	_ keyrate.WaitLimiter   = (*Store)(nil)
)

// New returns a store enforcing limit on every key, in client's Redis, or
// the policies of keyrate.WithPolicies and keyrate.WithPolicyFunc.
//
// client must honour context deadlines (redis.Options.ContextTimeoutEnabled,
// or the ClusterOptions and RingOptions field of that name), or the timeout
// could not bound a slow server's reply: New checks it for *redis.Client,
// *redis.ClusterClient and *redis.Ring. The server must be Redis 5 or later
// (the script reads TIME before writing, which needs effects replication).
//
// New returns an error wrapping keyrate.ErrInvalidLimit if limit is out of
// range for keyrate (limit.Validate) or for the script: a token interval
// below 1µs, a fill time beyond 2^52 ticks of 1/k µs (142 years at k = 1),
// a window algorithm's window (keyrate.Limit.Using) that is not a whole
// number of µs, a sliding window whose Rate times its length in µs
// exceeds 2^53, or a keyrate.SlidingLog limit whose window is not a
// whole number of µs or whose Rate is above MaxLogRate; and one wrapping
// keyrate.ErrInvalidPolicy (and
// ErrInvalidLimit) for a policy out of range, with a window out of the
// script's range, or with window algorithms whose lengths have no common
// multiple within a year (see the package documentation). It
// returns an error wrapping keyrate.ErrInvalidOption for a nil client (nil
// itself, or a nil pointer of any client type, such as
// (*redis.Client)(nil)), a zero go-redis client (new(redis.Client): not
// made by its constructor), one without context deadlines, an option that
// does not apply (keyrate.WithClock among them: use WithTimeSource for
// tests; and keyrate.WithMaxKeys, WithSweepInterval and WithHashedKeys,
// since Redis expires a key when its bucket is full), or an option value
// out of range. Those checks send nothing to Redis.
//
// Then, unless WithEvictionAllowed is given, New sends one CONFIG GET
// maxmemory-policy to every server behind client (each node of a Cluster,
// each shard of a Ring), all within the store's timeout, and returns an
// error wrapping ErrEvictingPolicy, naming the server and its policy, if
// any answers a policy other than noeviction: see ErrEvictingPolicy for
// why. If a server cannot answer (CONFIG renamed away or denied by an ACL,
// as on many managed services; the server unreachable, or too slow, at
// start) New still returns the store, since an outage is the failure
// policy's to answer: PolicyCheck then returns an error wrapping
// ErrPolicyUnchecked that says why, and New passes that error to the
// WithOnError callback, if any, before it returns. The check is not a call
// Stats counts.
func New(client redis.UniversalClient, limit keyrate.Limit, opts ...keyrate.Option) (*Store, error) {
	set := defaults()
	common, err := config.Configure(&set, opts...)
	if err != nil {
		return nil, err
	}
	if common.Clock != clock.System() {
		return nil, fmt.Errorf("%w: keyrate.WithClock does not apply to redisbucket, whose clock is the server's TIME: use redisbucket.WithTimeSource for tests and replay",
			keyrate.ErrInvalidOption)
	}
	switch {
	case common.MaxKeys != 0:
		return nil, fmt.Errorf("%w: keyrate.WithMaxKeys does not apply to redisbucket: bound the server's memory with maxmemory", keyrate.ErrInvalidOption)
	case common.SweepInterval != 0:
		return nil, fmt.Errorf("%w: keyrate.WithSweepInterval does not apply to redisbucket: a full bucket's key expires by itself", keyrate.ErrInvalidOption)
	case common.HashedKeys:
		return nil, fmt.Errorf("%w: keyrate.WithHashedKeys does not apply to redisbucket", keyrate.ErrInvalidOption)
	}
	if err := set.check(); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, fmt.Errorf("%w: redisbucket.New: nil client", keyrate.ErrInvalidOption)
	}
	if isnil.Is(client) {
		return nil, fmt.Errorf("%w: redisbucket.New: nil client (%T)", keyrate.ErrInvalidOption, client)
	}
	if zeroClient(client) {
		return nil, fmt.Errorf("%w: redisbucket.New: a zero %T, not made by its constructor (redis.NewClient, NewClusterClient, NewRing)", keyrate.ErrInvalidOption, client)
	}
	if known, enabled := contextTimeouts(client); known && !enabled {
		return nil, fmt.Errorf("%w: redisbucket.New: the client's ContextTimeoutEnabled is false, so no timeout could bound a call: set it in the client's options",
			keyrate.ErrInvalidOption)
	}
	if set.lease != nil { // every Burst lowered by the leases' slack
		if limit, err = leaseLimit(limit, set.lease.Life); err != nil {
			return nil, err
		}
		ps := make([]keyrate.Policy, len(common.Policies))
		for i, p := range common.Policies {
			if ps[i], err = leasePolicy(p, set.lease.Life); err != nil {
				return nil, err
			}
		}
		common.Policies = ps
	}
	s := &Store{client: client, set: set, deadlines: newDeadlines(set.timeout)}
	if s.pols, s.base, err = compilePolicies(limit, common); err != nil {
		return nil, err
	}
	s.baseArg = s.base
	if set.denyCache > 0 {
		s.deny = newDenyCache(set.denyCache)
	}
	if set.breaker != nil {
		s.brk = newBreakers(*set.breaker, client)
	}
	if set.lease != nil {
		s.leases = newLeases(*set.lease, s.localClock())
	}
	if p := set.pipelining; p != nil {
		s.batch = newBatcher(p.InFlight, p.MaxBatch, s.deadlines, client)
	}
	if set.policy == FallbackLocal {
		if s.fallback, err = newFallback(limit, common, set); err != nil {
			return nil, fmt.Errorf("redisbucket: FallbackLocal's store: %w", err)
		}
	}
	s.fleetNodes.Store(int64(max(set.fallbackNodes, 1)))
	s.policyErr = errSkipped
	if !set.evictionAllowed {
		s.policyErr = checkPolicy(client, set.timeout)
		if errors.Is(s.policyErr, ErrEvictingPolicy) {
			return nil, s.policyErr
		}
		if s.policyErr != nil && set.onError != nil {
			set.onError(s.policyErr)
		}
	}
	if set.nodeCount != nil {
		if err := s.startCounter(*set.nodeCount); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// compilePolicies compiles the store's policies and checks limit and
// every window against the script's bounds (limit even when a policy named
// keyrate.DefaultPolicy replaces it, as rules.NewPolicies does). It
// compiles them for a clock frozen at 0: the script reads Redis's clock
// and returns each window's debt, which rules.Rules then reads as a
// state at reading 0. It also returns the store's base (see Store.base):
// window 0 of the default policy (limit, if the default is unlimited).
func compilePolicies(limit keyrate.Limit, common config.Settings) (*rules.Policies, string, error) {
	u, err := compileUnits(limit)
	if err != nil {
		return nil, "", err
	}
	common.Clock = clock.NewManual(0)
	pols, err := rules.NewPolicies(limit, common)
	if err != nil {
		return nil, "", err
	}
	for _, p := range pols.List() {
		if _, err := newPlan(p); err != nil {
			return nil, "", err
		}
	}
	if def := pols.Default(); !def.Unlimited() {
		u, _ = compileUnits(def.Rule(0).Limit())
	}
	if u.win > 0 {
		return pols, "-", nil // no value "a:b" was written under a window algorithm
	}
	return pols, u.desc(), nil
}

// newFallback returns FallbackLocal's in-process store: the store's
// policies, its default replaced by the WithFallbackLimit limit if any.
func newFallback(limit keyrate.Limit, common config.Settings, set settings) (*atomicbucket.Store, error) {
	ps := common.Policies
	if set.fallback != nil {
		limit = *set.fallback
		ps = slices.DeleteFunc(slices.Clone(ps), func(p keyrate.Policy) bool { return p.Name == keyrate.DefaultPolicy })
	}
	if n := set.fallbackNodes; n > 1 {
		var err error
		if limit, err = share(limit, n); err != nil {
			return nil, err
		}
		ps = slices.Clone(ps)
		for i := range ps {
			if ps[i], err = sharePolicy(ps[i], n); err != nil {
				return nil, err
			}
		}
	}
	opts := []keyrate.Option{keyrate.WithPolicies(ps...)}
	if common.PolicyFunc != nil {
		opts = append(opts, keyrate.WithPolicyFunc(common.PolicyFunc))
	}
	if set.timeSource != nil {
		opts = append(opts, keyrate.WithClock(set.timeSource))
	}
	return atomicbucket.New(limit, opts...)
}

// zeroClient reports whether client is a go-redis client New reads the
// options of, but the zero value of its type (new(redis.Client)): one
// not made by its constructor, whose every method panics.
func zeroClient(client redis.UniversalClient) bool {
	switch client.(type) {
	case *redis.Client, *redis.ClusterClient, *redis.Ring:
		return reflect.ValueOf(client).Elem().IsZero()
	}
	return false
}

// contextTimeouts reports whether client's type is one whose options New
// can read, and if so whether it honours context deadlines.
func contextTimeouts(client redis.UniversalClient) (known, enabled bool) {
	switch c := client.(type) {
	case *redis.Client:
		return true, c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return true, c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return true, c.Options().ContextTimeoutEnabled
	}
	return false, false
}

// Limit returns the limit of the default policy's first window: the limit
// given to New, unless keyrate.WithPolicies or SetPolicy replaced the
// default policy. It is the zero Limit if the default is unlimited.
func (s *Store) Limit() keyrate.Limit { return first(s.pols.Default()) }

// first returns the limit of rs's first window, or the zero Limit.
func first(rs *rules.Rules) keyrate.Limit {
	if rs.Unlimited() {
		return keyrate.Limit{}
	}
	return rs.Rule(0).Limit()
}

// Allow reports whether one token may be spent for key now, and spends it
// if so. It is shorthand for AllowN(key, 1).Allowed: false for an invalid
// key or an unknown policy, and the failure policy's answer when Redis
// does not answer.
func (s *Store) Allow(key string) bool {
	d, _ := s.AllowNContext(context.Background(), key, 1)
	return d.Allowed
}

// AllowN is AllowNContext with context.Background(): still bounded by the
// store's timeout.
func (s *Store) AllowN(key string, cost int) (keyrate.Decision, error) {
	return s.AllowNContext(context.Background(), key, cost)
}

// AllowNContext spends cost tokens for key, under key's policy (the
// default, or the one keyrate.WithPolicyFunc names), if every window of
// its bucket holds that many, and reports the decision, in one round trip
// to Redis bounded by ctx and the store's timeout.
//
// It returns an error wrapping keyrate.ErrUnknownPolicy if the function of
// keyrate.WithPolicyFunc names a policy the store lacks,
// keyrate.ErrInvalidCost for cost < 1, keyrate.ErrCostExceedsBurst for cost
// above the smallest Burst of the policy's windows and
// keyrate.ErrInvalidKey for an empty key or one over MaxKeyLen bytes,
// sending nothing. If ctx is done before Redis answers, it returns a zero
// Decision and an error wrapping ctx.Err(): the caller gave up, which is
// not an outage. If Redis fails to answer within the timeout, the Decision
// is the failure policy's (see FailurePolicy), with an error wrapping
// ErrUnavailable under FailClosed and no error under FailOpen and
// FallbackLocal.
func (s *Store) AllowNContext(ctx context.Context, key string, cost int) (keyrate.Decision, error) {
	ctx = orBackground(ctx)
	rs, err := s.pols.ForKey(key)
	if err != nil {
		s.pols.ObserveMiss(key, keyrate.Tier{}, cost, err)
		return keyrate.Decision{}, err
	}
	return s.allow(ctx, key, rs, cost)
}

// allow is AllowNContext under rs, told to the store's observer.
func (s *Store) allow(ctx context.Context, key string, rs *rules.Rules, cost int) (keyrate.Decision, error) {
	d, err, degraded := s.decide(ctx, key, rs, cost)
	if s.pols.Observer() != nil {
		s.pols.ObserveEvent(keyrate.Event{Key: key, Policy: rs.Name(), Cost: cost, Allowed: d.Allowed, Err: err, Degraded: degraded})
	}
	return d, err
}

// decide is allow's decision, and whether the failure policy made it
// (Redis failed).
func (s *Store) decide(ctx context.Context, key string, rs *rules.Rules, cost int) (_ keyrate.Decision, _ error, degraded bool) {
	if err := rs.CheckCost(cost); err != nil {
		return keyrate.Decision{}, err, false
	}
	if err := checkKey(key); err != nil {
		return keyrate.Decision{}, err, false
	}
	if rs.Unlimited() {
		return rs.UnlimitedDecision(), nil, false
	}
	if err := ctx.Err(); err != nil {
		return keyrate.Decision{}, fmt.Errorf("redisbucket: %w", err), false
	}
	if s.deny != nil && !rs.IsLog() { // a log's summary alone cannot say when it admits again
		if d, ok := s.deny.deny(key, rs, cost, s.denyNow()); ok {
			s.deniedLocally.Add(1)
			return d, nil, false
		}
	}
	rt := ctx // the context of the call's round trips
	if s.leases != nil && !windowed(rs) {
		var d keyrate.Decision
		var ok bool
		var err error
		if d, ok, err, degraded, rt = s.leases.allow(ctx, s, key, rs, cost); ok {
			return d, err, degraded
		}
	}
	var st [keyrate.MaxLimits]rules.State
	n := rs.Len()
	denied, t0, err := s.eval(rt, key, rs, cost, st[:n])
	if err == nil {
		d := rs.Decide(st[:n], t0, cost, denied)
		if s.deny != nil && !rs.IsLog() {
			if denied >= 0 || d.Remaining == 0 {
				s.deny.put(key, rs, st[:n], t0, s.denyNow())
			} else {
				s.deny.drop(key)
			}
		}
		return d, nil, false
	}
	return s.failed(ctx, key, rs, cost, err)
}

// failed is the answer to a request of cost for key under rs whose call
// to Redis failed with err: ctx's error if the caller gave up, else the
// failure policy's.
// It reports whether the failure policy answered (degraded).
func (s *Store) failed(ctx context.Context, key string, rs *rules.Rules, cost int, err error) (_ keyrate.Decision, _ error, degraded bool) {
	if ctx.Err() != nil {
		return keyrate.Decision{}, fmt.Errorf("redisbucket: %w", ctx.Err()), false
	}
	s.degraded.Add(1)
	switch s.set.policy {
	case FailOpen:
		return keyrate.Decision{Allowed: true, Policy: rs.Name(), Limit: first(rs)}, nil, true
	case FallbackLocal:
		if t, err := s.fallback.Tier(rs.Name()); err == nil {
			if d, err := s.fallback.AllowTier(key, t, cost); err == nil {
				return d, nil, true
			}
		}
		// The fallback can never allow it (a cost above its Burst): deny
		// as FailClosed does, without the error, as the policy promises.
		return closed(rs, cost), nil, true
	}
	return closed(rs, cost), err, true
}

// closed is FailClosed's answer under rs: denied, with RetryAfter the time
// cost tokens take to accrue in every window, and ResetAfter 0.
func closed(rs *rules.Rules, cost int) keyrate.Decision {
	var st [keyrate.MaxLimits]rules.State
	if rs.IsLog() { // a full log at reading 0, its N admitted then: empty at W
		w := rules.State(first(rs).Per)
		st[0], st[1], st[2], st[3] = 0, rules.State(first(rs).Rate), w, w
	} else {
		for i := range rs.Len() {
			st[i] = rs.Rule(i).Encode(0, 0) // empty
		}
	}
	d := rs.Decide(st[:rs.Len()], 0, cost, 0)
	d.ResetAfter, d.WindowResetAfter = 0, 0
	return d
}

// Peek is PeekContext with context.Background(), returning only the
// Decision: for an invalid key, a denied Decision with only Policy and
// Limit set; for a key whose policy the store lacks, a zero Decision.
func (s *Store) Peek(key string) keyrate.Decision {
	d, err := s.PeekContext(context.Background(), key)
	if err != nil && d == (keyrate.Decision{}) {
		if rs, err := s.pols.ForKey(key); err == nil {
			d.Policy, d.Limit = rs.Name(), first(rs)
		}
	}
	return d
}

// PeekContext reports what a cost-1 request for key would get now, under
// key's policy, spending nothing and storing nothing, in one round trip
// bounded by ctx and the store's timeout. Its errors, and its answer when
// Redis fails, are those of AllowNContext for a cost of 1, except that
// FallbackLocal peeks at the fallback store.
func (s *Store) PeekContext(ctx context.Context, key string) (keyrate.Decision, error) {
	ctx = orBackground(ctx)
	rs, err := s.pols.ForKey(key)
	if err != nil {
		return keyrate.Decision{}, err
	}
	return s.peek(ctx, key, rs)
}

// peek is PeekContext under rs.
func (s *Store) peek(ctx context.Context, key string, rs *rules.Rules) (keyrate.Decision, error) {
	if err := checkKey(key); err != nil {
		return keyrate.Decision{}, err
	}
	if rs.Unlimited() {
		return rs.UnlimitedDecision(), nil
	}
	if err := ctx.Err(); err != nil {
		return keyrate.Decision{}, fmt.Errorf("redisbucket: %w", err)
	}
	var st [keyrate.MaxLimits]rules.State
	n := rs.Len()
	var t0 time.Duration
	var err error
	if _, t0, err = s.eval(ctx, key, rs, 0, st[:n]); err == nil {
		return rs.Peek(st[:n], t0), nil
	}
	if ctx.Err() != nil {
		return keyrate.Decision{}, fmt.Errorf("redisbucket: %w", ctx.Err())
	}
	s.degraded.Add(1)
	switch s.set.policy {
	case FailOpen:
		return keyrate.Decision{Allowed: true, Policy: rs.Name(), Limit: first(rs)}, nil
	case FallbackLocal:
		if t, terr := s.fallback.Tier(rs.Name()); terr == nil {
			if d, perr := s.fallback.PeekTier(key, t); perr == nil {
				return d, nil
			}
		}
		return closed(rs, 1), nil // not reached: the fallback has every policy
	}
	return closed(rs, 1), err
}

// plan returns rs compiled for the script.
func (s *Store) plan(rs *rules.Rules) (*plan, error) {
	if p, ok := s.plans.Load(rs); ok {
		return p.(*plan), nil
	}
	p, err := newPlan(rs.Policy()) // checked by New or SetPolicy: cannot fail
	if err != nil {
		return nil, err
	}
	if p.local, err = rules.NewRules(rs.Policy(), s.localClock()); err != nil {
		return nil, err
	}
	p.short = p.desc == s.base
	actual, _ := s.plans.LoadOrStore(rs, p)
	return actual.(*plan), nil
}

// eval runs the script for key under rs: it spends cost tokens (cost > 0),
// peeks (0) or refunds −cost tokens (cost < 0), writes the windows' states
// after the call into st, as rs reads them at the reading t0 it returns
// (0 unless rs has a window algorithm: see plan.lcm), and returns the
// window that denied a spend (-1 if none). Its error wraps ErrUnavailable
// and has been counted and reported, unless parent is done.
func (s *Store) eval(parent context.Context, key string, rs *rules.Rules, cost int, st []rules.State) (denied int, t0 time.Duration, err error) {
	denied, _, t0, err = s.evalMode(parent, key, rs, cost, "", st)
	return denied, t0, err
}

// evalMode is eval in the script's mode: "" as eval, or a reservation's
// "R:u:x" (see gcraScript), for which it also returns the server's now in
// µs, as the script read it.
func (s *Store) evalMode(parent context.Context, key string, rs *rules.Rules, cost int, mode string, st []rules.State) (denied int, now int64, t0 time.Duration, err error) {
	p, err := s.plan(rs)
	if err != nil {
		return 0, 0, 0, s.fail(err)
	}
	rkey := s.redisKey(key)
	res, err := s.run(parent, rkey, p, cost, mode)
	if err == errRefused {
		return 0, 0, 0, wrap.Errorf("%w: %w", ErrUnavailable, err) // counted by the breaker
	}
	bad, extra := false, 0
	if mode != "" || p.lcm > 0 {
		extra = 1
	}
	if err == nil && p.log {
		denied, bad, err = p.readLog(res, st)
	} else if err == nil {
		denied, t0, bad, err = p.read(res, st, extra)
	}
	if err != nil {
		if parent.Err() != nil {
			return 0, 0, 0, err // the caller gave up: not an outage
		}
		return 0, 0, 0, s.fail(err)
	}
	if extra == 1 {
		now = res[len(res)-1]
	}
	if s.deny != nil && (cost < 0 || mode != "") {
		s.deny.drop(key) // a refund or a reservation: the allow that called has its own
	}
	if bad {
		s.malformed.Add(1)
		if f := s.set.onError; f != nil {
			what := "answered as an empty bucket and replaced with one"
			switch {
			case cost == 0:
				what = "answered as an empty bucket (Peek writes nothing)"
			case cost < 0:
				what = "read as an empty bucket, given the refund, and replaced with the result"
			}
			f(fmt.Errorf("%w at key %q: %s", ErrMalformedBucket, rkey, what))
		}
	}
	return denied, now, t0, nil
}

// windowed reports whether rs has a window algorithm's window, or is a
// keyrate.SlidingLog policy.
func windowed(rs *rules.Rules) bool {
	if rs.IsLog() {
		return true
	}
	for i := range rs.Len() {
		if rs.Rule(i).Algorithm().Windowed() {
			return true
		}
	}
	return false
}

// run sends one EVALSHA of the script (EVAL if the server lacks it) for
// the Redis key rkey under p, bounded by parent and the store's timeout,
// and returns its reply; or, sending nothing, errRefused if the circuit
// breaker of rkey's server is open (see roundTrip).
func (s *Store) run(parent context.Context, rkey string, p *plan, cost int, mode string) (res []int64, err error) {
	err = s.roundTrip(parent, rkey, func(ctx context.Context) error {
		res, err = s.send(ctx, rkey, p, cost, mode)
		return err
	})
	return res, err
}

// roundTrip makes one round trip to the server of the Redis key rkey:
// send, given parent bounded by the store's timeout; or, sending nothing,
// errRefused if the circuit breaker of rkey's server is open. It counts
// the call in Stats.Calls and its outcome in the breaker. Every round
// trip of a Store (its buckets', its InflightStores') goes through it.
func (s *Store) roundTrip(parent context.Context, rkey string, send func(ctx context.Context) error) error {
	ctx, cancel := s.deadlines.with(parent)
	defer cancel()
	if s.brk == nil {
		s.calls.Add(1)
		return send(ctx)
	}
	b := s.brk.of(ctx, rkey)
	probe, err := b.enter()
	if err != nil {
		return err
	}
	s.calls.Add(1)
	sent := false
	defer func() {
		if !sent { // the client panicked (a hook's panic): no verdict, but a probe must not stay in flight for good
			b.exit(probe, gaveUp, nil)
		}
	}()
	err = send(ctx)
	sent = true
	o := answered
	if err != nil {
		o = failed
		if parent.Err() != nil {
			o = gaveUp
		}
	}
	if change := b.exit(probe, o, err); change != nil && s.set.onError != nil {
		s.set.onError(change)
	}
	return err
}

// send is run's call, bounded by ctx.
func (s *Store) send(ctx context.Context, rkey string, p *plan, cost int, mode string) ([]int64, error) {
	var now, minTTL any = "-1", "0" // the server's TIME
	if ts := s.set.timeSource; ts != nil {
		now, minTTL = micros(ts.Now()), timeSourceTTLArg
	}
	if p.multi != nil { // Store.AllowAllContext's one call (multikey.go)
		return sendMulti(ctx, s.client, s.batch, p.multi, now, minTTL)
	}
	var m any = ""
	if mode != "" {
		m = mode
	}
	bp := argPool.Get().(*[]any)
	if p.log {
		args := append((*bp)[:0], "evalsha", logSHA, "1", rkey, now, cost, minTTL)
		return call(ctx, s.client, s.batch, bp, append(append(args, p.args...), s.baseArg), logSource)
	}
	args := append((*bp)[:0], "evalsha", scriptSHA, "1", rkey, now, cost, minTTL)
	if p.short && mode == "" { // the short form: the windows, then the descriptor
		return call(ctx, s.client, s.batch, bp, append(append(args, p.args...), p.descArg), gcraSource)
	}
	args = append(args, p.descArg, s.baseArg, m)
	return call(ctx, s.client, s.batch, bp, append(args, p.args...), gcraSource)
}

// fail counts a failed round trip, reports it to the callback, and returns
// it wrapped in ErrUnavailable.
func (s *Store) fail(err error) error {
	s.errs.Add(1)
	err = wrap.Errorf("%w: %w", ErrUnavailable, err)
	if f := s.set.onError; f != nil {
		f(err)
	}
	return err
}

// denyNow is the deny cache's reading of the local clock: the time
// source's, truncated to a whole µs as the script reads it, or
// clock.System()'s.
func (s *Store) denyNow() time.Duration {
	if ts := s.set.timeSource; ts != nil {
		return time.Duration(micros(ts.Now())) * time.Microsecond
	}
	return clock.System().Now()
}

// timeSourceTTLArg is timeSourceTTL in ms, as the script's argument.
var timeSourceTTLArg = strconv.FormatInt(timeSourceTTL.Milliseconds(), 10)

// micros converts a time source's reading to the script's whole µs,
// truncating, and clamped to [0, maxMicros].
func micros(t time.Duration) int64 {
	return min(max(int64(t/time.Microsecond), 0), maxMicros)
}

// scanCount is the COUNT hint of each SCAN page in Len.
const scanCount = 1000

// Len returns the number of keys under the store's prefix, or 0 if Redis
// does not answer (see LenContext for the error). It is LenContext with
// context.Background().
func (s *Store) Len() int {
	n, _ := s.LenContext(context.Background())
	return n
}

// LenContext returns the number of Redis keys under the store's prefix:
// this store's buckets that are not yet full again, plus those of any other
// store whose prefix begins with this one's. It walks the keyspace with
// SCAN MATCH, on every master of a Cluster or shard of a Ring: O(all keys
// in the database), one round trip per page of about 1000 keys, each page
// bounded by the store's timeout, so it is for tests and diagnostics, not
// for a request path. An error wraps ErrUnavailable or ctx.Err().
func (s *Store) LenContext(ctx context.Context) (int, error) {
	ctx = orBackground(ctx)
	var total atomic.Int64
	scan := func(ctx context.Context, c redis.Cmdable) error {
		n, err := s.scan(ctx, c)
		total.Add(n)
		return err
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	default:
		err = scan(ctx, s.client)
	}
	if err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("redisbucket: %w", ctx.Err())
		}
		return 0, err
	}
	return int(total.Load()), nil
}

// scan counts the keys under the prefix on one server, one page per round
// trip. Its error wraps ErrUnavailable and has been counted.
func (s *Store) scan(ctx context.Context, c redis.Cmdable) (int64, error) {
	pattern := scanPattern(s.set.prefix)
	var n int64
	var cursor uint64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		s.calls.Add(1)
		page, next, err := s.scanPage(ctx, c, cursor, pattern)
		if err != nil {
			if ctx.Err() != nil {
				return n, err // the caller gave up: not an outage
			}
			return n, s.fail(err)
		}
		n += int64(len(page))
		if cursor = next; cursor == 0 {
			return n, nil
		}
	}
}

func (s *Store) scanPage(ctx context.Context, c redis.Cmdable, cursor uint64, pattern string) ([]string, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.set.timeout)
	defer cancel()
	return c.Scan(ctx, cursor, pattern, scanCount).Result()
}

// Stats returns the store's counts of Redis calls and failures so far.
func (s *Store) Stats() Stats {
	st := Stats{Calls: s.calls.Load(), Errors: s.errs.Load(), Degraded: s.degraded.Load(), Malformed: s.malformed.Load(),
		DeniedLocally: s.deniedLocally.Load(), Leases: s.leasesTaken.Load(), Leased: s.leased.Load()}
	if s.set.fallbackNodes > 0 || s.counter != nil {
		st.FleetNodes = int(s.fleetNodes.Load())
	}
	if b := s.brk; b != nil {
		st.BreakerOpen = b.open()
		st.BreakerOpens, st.BreakerCloses, st.ShortCircuited = b.counts.opens.Load(), b.counts.closes.Load(), b.counts.refused.Load()
	}
	return st
}
