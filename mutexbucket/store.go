package mutexbucket

import (
	"context"
	"sync"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/handle"
	"github.com/keyrate/keyrate/internal/multi"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/sweep"
)

// Store is the keyrate store of one mutex per bucket: each key's bucket
// sits behind its own sync.Mutex, in a concurrent map from key to bucket.
// It implements keyrate.Limiter, keyrate.PolicyLimiter (tiers, policies of
// several windows, SetPolicy, Refund), keyrate.WaitLimiter (Reserve, Wait,
// Cancel) and keyrate.BoundedLimiter (Len, Sweep, Stats, Close), and runs
// every algorithm, keyrate.SlidingLog included.
//
// Call Allow or AllowN on the request path (AllowTier under a tier), Peek
// to look without spending, Wait or Reserve where a caller may wait its
// turn, and Refund to give back tokens a request did not use. Calls on
// different keys never contend; calls on one key serialise on its mutex,
// but for a request that its one-window bucket's state already denies,
// which reads that state without the lock and writes nothing. A known key
// costs no allocation; a new key allocates its bucket.
//
// A Store is safe for concurrent use. Create one with New, and Close it
// when done with it (Close stops the background sweeper and waits for a
// sweep in flight); the zero value is not usable (its methods, as a nil
// Store's, panic: check New's error).
//
// Options and their defaults: keyrate.WithClock (clock.System()),
// keyrate.WithMaxKeys (no cap; a full store fails closed with
// keyrate.ErrStoreFull), keyrate.WithSweepInterval (no background
// sweeper), keyrate.WithEvictionGrace (keyrate.DefaultEvictionGrace),
// keyrate.WithHashedKeys (off), keyrate.WithPolicies,
// keyrate.WithPolicyFunc and keyrate.WithObserver (none). The package
// documentation says how the map and its sweeps work, without changing any
// decision.
type Store struct {
	pols    *rules.Policies
	strs    *xsync.MapOf[string, *bucket] // buckets.Strings(), for the hot path
	buckets sweep.Map[*bucket]
	// refunds is what every refund goes through, so that AllowAll's undo
	// is never fooled by one (multi.Refunds).
	refunds multi.Refunds
}

// bucket is one key's states, under one policy, and the mutex that guards
// them. A swept bucket's window 0 is rules.Tombstone; one not spent
// from yet, sweep.Fresh.
type bucket struct {
	mu sync.Mutex
	b  sweep.Block
}

// Rules returns the policy b is under. See sweep.Bucket.
func (b *bucket) Rules() *rules.Rules { return b.b.Rules }

// Evict marks b as swept if it is full at reading t. See sweep.Bucket.
func (b *bucket) Evict(t time.Duration, floor *sweep.Floor) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.b.Full(t, floor) {
		return false
	}
	b.b.SetFirst(rules.Tombstone)
	return true
}

var (
	_ keyrate.Limiter        = (*Store)(nil)
	_ keyrate.BoundedLimiter = (*Store)(nil)
	_ keyrate.PolicyLimiter  = (*Store)(nil)
	_ keyrate.WaitLimiter    = (*Store)(nil)
)

// New returns a store enforcing limit on every key, or the policies of
// keyrate.WithPolicies and keyrate.WithPolicyFunc. It returns an error
// wrapping keyrate.ErrInvalidLimit, keyrate.ErrInvalidPolicy or
// keyrate.ErrInvalidOption if limit, a policy or an option is out of
// range.
func New(limit keyrate.Limit, opts ...keyrate.Option) (*Store, error) {
	s := new(Store)
	if err := s.buckets.Init(&s.pols, limit, opts, newBucket); err != nil {
		return nil, err
	}
	s.strs = s.buckets.Strings()
	return s, nil
}

// newBucket returns a new bucket under rs in states st (Fresh if nil).
func newBucket(rs *rules.Rules, st []rules.State) *bucket {
	b := new(bucket)
	b.b.Init(rs, st)
	return b
}

// spend spends cost tokens from b, a one-window bucket under r, at tick
// now if it holds them (or reserves them, if they are there within wait
// ticks: rules.Rule.Reserve), and returns the state after the call. It reports
// rare, and does nothing, if b is swept or not spent from yet:
// SpendRare's case.
//
// A request that the state it reads without the lock already denies is
// decided there, taking no lock and writing nothing: now was read before
// that load, as the locked path reads it before the lock, so the deny is
// the one the locked path would give had it taken the lock at the load
// (see the package documentation). Only a request the state read would
// allow takes the lock, and decides again from the state under it.
func spend(r *rules.Rule, b *bucket, now uint64, cost int, wait uint64) (state rules.State, ok, rare bool) {
	if r.Algorithm() != keyrate.TokenBucket {
		return spendWindow(r, b, now, cost, wait)
	}
	old := b.b.First()
	if old >= sweep.Fresh {
		return 0, false, true
	}
	// The token bucket's arithmetic, inlined; a deny leaves the state as
	// it was.
	next, ok := r.ReserveBucket(old, now, cost, wait)
	if !ok {
		return old, false, false
	}
	b.mu.Lock()
	if b.b.First() != old { // changed since the read
		return spendLocked(r, b, now, cost, wait)
	}
	b.b.SetFirst(next)
	b.mu.Unlock()
	return next, true, false
}

// spendWindow is spend for a rule of a window algorithm: the same steps,
// over rules.Rule.Reserve, which is not inlined (a call in spend's body
// would make it save its arguments on every call).
//
//go:noinline
func spendWindow(r *rules.Rule, b *bucket, now uint64, cost int, wait uint64) (state rules.State, ok, rare bool) {
	old := b.b.First()
	if old >= sweep.Fresh {
		return 0, false, true
	}
	next, ok := r.Reserve(old, now, cost, wait)
	if !ok {
		return old, false, false
	}
	b.mu.Lock()
	if b.b.First() != old {
		return spendLocked(r, b, now, cost, wait)
	}
	b.b.SetFirst(next)
	b.mu.Unlock()
	return next, true, false
}

// spendLocked is spend's decision under b's lock, which the caller holds
// and spendLocked lets go of: for a state that changed between spend's
// read and its lock.
//
//go:noinline
func spendLocked(r *rules.Rule, b *bucket, now uint64, cost int, wait uint64) (state rules.State, ok, rare bool) {
	defer b.mu.Unlock()
	old := b.b.First()
	if old >= sweep.Fresh {
		return 0, false, true
	}
	next, ok := r.Reserve(old, now, cost, wait)
	if ok { // a deny writes nothing
		b.b.SetFirst(next)
	}
	return next, ok, false
}

// SpendRare is spend for a bucket of any number of windows that may be
// swept (it reports swept and does nothing) or not spent from yet (it
// reads as the floor). See sweep.Bucket.
func (b *bucket) SpendRare(t time.Duration, cost int, wait time.Duration, floor *sweep.Floor) (s sweep.States, at time.Duration, denied int, swept bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.First() == rules.Tombstone {
		return s, t, 0, true
	}
	t, denied = b.b.Spend(t, cost, wait, floor, s[:b.b.Rules.Len()])
	return s, t, denied, false
}

// Refund gives cost tokens back to b. See sweep.Bucket.
func (b *bucket) Refund(t time.Duration, cost int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.First() == rules.Tombstone {
		return true
	}
	b.b.Refund(t, cost)
	return false
}

// Cancel gives back a reservation's tokens if b allows it. See
// sweep.Bucket.
func (b *bucket) Cancel(end rules.State, slot time.Duration, cost int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Cancel(end, b.b.Rules.Now(), slot, cost)
}

// Retire marks b swept and copies its states out. See sweep.Bucket.
func (b *bucket) Retire() (s sweep.States, fresh, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.b.First() {
	case rules.Tombstone:
		return s, false, false
	case sweep.Fresh:
		fresh = true
	default:
		b.b.Load(s[:b.b.Rules.Len()])
	}
	b.b.SetFirst(rules.Tombstone)
	return s, fresh, true
}

// Swept reports whether b is swept. See sweep.Bucket.
func (b *bucket) Swept() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.First() == rules.Tombstone
}

// States copies b's states out. See sweep.Bucket.
func (b *bucket) States() (s sweep.States, live bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.First() >= sweep.Fresh {
		return s, false
	}
	b.b.Load(s[:b.b.Rules.Len()])
	return s, true
}

// Allow reports whether one token may be spent for key now, and spends it
// if so. It is shorthand for AllowN(key, 1).Allowed: false also when the
// store is full (keyrate.WithMaxKeys) and key is new, and when the
// function of keyrate.WithPolicyFunc names a policy the store lacks.
func (s *Store) Allow(key string) bool {
	if s.pols.Observer() != nil {
		return s.allowObserved(key)
	}
	rs := s.pols.Default()
	if s.pols.HasFunc() {
		var err error
		if rs, err = s.pols.ForKey(key); err != nil {
			return false
		}
	}
	if s.strs != nil && rs.Len() == 1 { // the hot path: a known string key
		if b, ok := s.strs.Load(key); ok && b.b.Rules == rs {
			r := rs.Rule(0)
			if _, ok, rare := spend(r, b, r.Now(), 1, 0); !rare {
				return ok
			}
		}
	}
	return s.buckets.Allow(key, rs)
}

// allowObserved is Allow for a store with an observer: AllowN, which
// tells it. (Out of line, so that Allow's frame stays that of its hot
// path.)
//
//go:noinline
func (s *Store) allowObserved(key string) bool {
	d, err := s.AllowN(key, 1)
	return err == nil && d.Allowed
}

// AllowN spends cost tokens for key if every window of its bucket holds
// that many, and reports the decision. See keyrate.Limiter. For a new key
// that a full store cannot track it returns an error wrapping
// keyrate.ErrStoreFull.
func (s *Store) AllowN(key string, cost int) (keyrate.Decision, error) {
	rs := s.pols.Default()
	if s.pols.HasFunc() {
		var err error
		if rs, err = s.pols.ForKey(key); err != nil {
			s.pols.ObserveMiss(key, keyrate.Tier{}, cost, err)
			return keyrate.Decision{}, err
		}
	}
	if s.pols.Observer() == nil {
		return s.allow(key, rs, cost)
	}
	d, err := s.allow(key, rs, cost)
	s.pols.Observe(key, rs.Name(), cost, d.Allowed, err)
	return d, err
}

// AllowTier is AllowN under tier's policy. See keyrate.PolicyLimiter.
func (s *Store) AllowTier(key string, tier keyrate.Tier, cost int) (keyrate.Decision, error) {
	rs, err := s.pols.Rules(tier)
	if err != nil {
		s.pols.ObserveMiss(key, tier, cost, err)
		return keyrate.Decision{}, err
	}
	if s.pols.Observer() == nil {
		return s.allow(key, rs, cost)
	}
	d, err := s.allow(key, rs, cost)
	s.pols.Observe(key, rs.Name(), cost, d.Allowed, err)
	return d, err
}

// allow is AllowN under rs.
func (s *Store) allow(key string, rs *rules.Rules, cost int) (keyrate.Decision, error) {
	if err := rs.CheckCost(cost); err != nil {
		return keyrate.Decision{}, err
	}
	if s.strs != nil && rs.Len() == 1 { // the hot path: a known string key
		if b, ok := s.strs.Load(key); ok && b.b.Rules == rs {
			r := rs.Rule(0)
			now := r.Now()
			if state, ok, rare := spend(r, b, now, cost, 0); !rare {
				return r.Decide(state, now, cost, ok), nil
			}
		}
	}
	return s.buckets.AllowN(key, rs, cost)
}

// Reserve reserves cost tokens of key for the earliest slot at most
// maxWait away: one locked step for a known key. See keyrate.WaitLimiter.
func (s *Store) Reserve(key string, cost int, maxWait time.Duration) (keyrate.Reservation, error) {
	return sweep.Reserve(s.pols, (*front)(s), key, cost, maxWait)
}

// ReserveTier is Reserve under tier's policy. See keyrate.WaitLimiter.
func (s *Store) ReserveTier(key string, tier keyrate.Tier, cost int, maxWait time.Duration) (keyrate.Reservation, error) {
	return sweep.ReserveTier(s.pols, (*front)(s), key, tier, cost, maxWait)
}

// Wait spends cost tokens of key, waiting for them on the store's clock
// if need be. See keyrate.WaitLimiter.
func (s *Store) Wait(ctx context.Context, key string, cost int) error {
	return sweep.Wait(ctx, s.pols, (*front)(s), key, cost)
}

// WaitTier is Wait under tier's policy. See keyrate.WaitLimiter.
func (s *Store) WaitTier(ctx context.Context, key string, tier keyrate.Tier, cost int) error {
	return sweep.WaitTier(ctx, s.pols, (*front)(s), key, tier, cost)
}

// front is the store as a sweep.Reserver: its reservations, for the
// shared front of Reserve and Wait, kept out of the store's API.
type front Store

// ReserveOne is the known-key fast path. See sweep.Reserver.
func (f *front) ReserveOne(key string, rs *rules.Rules, cost int, wait time.Duration) (state rules.State, t time.Duration, ok, hit bool) {
	s := (*Store)(f)
	if s.strs == nil || rs.Len() != 1 {
		return 0, 0, false, false
	}
	b, found := s.strs.Load(key)
	if !found || b.b.Rules != rs {
		return 0, 0, false, false
	}
	r := rs.Rule(0)
	t = rs.Now()
	if state, ok, rare := spend(r, b, r.Ticks(t), cost, r.WaitTicks(wait)); !rare {
		return state, t, ok, true
	}
	return 0, 0, false, false
}

// ReserveRare is the slow path. See sweep.Reserver.
func (f *front) ReserveRare(key string, rs *rules.Rules, cost int, wait time.Duration) (keyrate.Reservation, error) {
	return f.buckets.Reserve(f, key, rs, cost, wait)
}

// Cancel is the store's Cancel. See sweep.Reserver.
func (f *front) Cancel(r keyrate.Reservation) bool { return (*Store)(f).Cancel(r) }

// Cancel gives back the tokens of a reservation this store made, if its
// slot has not come and the key's bucket has not changed since. See
// keyrate.Reservation.Cancel.
func (s *Store) Cancel(r keyrate.Reservation) bool { return s.buckets.Cancel(r) }

// Peek reports what a cost-1 request for key would get now, spending
// nothing and storing nothing.
func (s *Store) Peek(key string) keyrate.Decision { return s.buckets.PeekKey(key) }

// PeekTier reports what a cost-1 request for key would get under tier's
// policy, spending nothing. See keyrate.PolicyLimiter.
func (s *Store) PeekTier(key string, tier keyrate.Tier) (keyrate.Decision, error) {
	return s.buckets.PeekTier(key, tier)
}

// Tier returns a handle on the policy named name. See
// keyrate.PolicyLimiter.
func (s *Store) Tier(name string) (keyrate.Tier, error) { return s.pols.Tier(name) }

// Refund gives cost tokens back to key. See keyrate.PolicyLimiter.
func (s *Store) Refund(key string, cost int) error {
	s.refunds.Begin()
	defer s.refunds.End()
	return s.buckets.RefundKey(key, cost)
}

// RefundTier gives cost tokens back to key under tier's policy. See
// keyrate.PolicyLimiter.
func (s *Store) RefundTier(key string, tier keyrate.Tier, cost int) error {
	s.refunds.Begin()
	defer s.refunds.End()
	return s.buckets.RefundTier(key, tier, cost)
}

// SetPolicy adds or replaces a policy at runtime. See
// keyrate.PolicyLimiter.
func (s *Store) SetPolicy(p keyrate.Policy) error { return s.pols.Set(p) }

// Policies returns the policies the store enforces now.
func (s *Store) Policies() []keyrate.Policy { return s.pols.List() }

// PolicyVersion is plumbing for httplimit (its parameter's type is
// internal: no other package can call it): the count of the store's
// policy changes so far, which tells the middleware that the header
// fields it built from Policies may be stale.
func (s *Store) PolicyVersion(handle.PolicyVersion) uint64 { return s.pols.Version() }

// Len returns the number of keys the store tracks.
func (s *Store) Len() int { return s.buckets.Len() }

// Sweep removes the bucket of every key that is full now, and returns how
// many it removed. See keyrate.BoundedLimiter.
func (s *Store) Sweep() int { return s.buckets.Sweep() }

// Stats returns a snapshot of the store's bookkeeping.
func (s *Store) Stats() keyrate.Stats { return s.buckets.Stats() }

// Close stops the background sweeper, if any, and waits for a sweep in
// flight. It is safe to call more than once, and always returns nil. See
// keyrate.BoundedLimiter.
func (s *Store) Close() error { return s.buckets.Close() }
