package striped

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/flatmap"
	"github.com/keyrate/keyrate/internal/handle"
	"github.com/keyrate/keyrate/internal/layout"
	"github.com/keyrate/keyrate/internal/multi"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/sweep"
)

// Store is the keyrate store of lock stripes: keys are spread by a seeded
// hash over a power of two of stripes, each a mutex and a pointer-free
// hash table of the keys' packed states. It implements keyrate.Limiter,
// keyrate.PolicyLimiter (tiers, policies of several windows, SetPolicy,
// Refund), keyrate.WaitLimiter (Reserve, Wait, Cancel) and
// keyrate.BoundedLimiter (Len, Sweep, Stats, Close), and runs every
// algorithm, keyrate.SlidingLog included.
//
// Call Allow or AllowN on the request path (AllowTier under a tier), Peek
// to look without spending, Wait or Reserve where a caller may wait its
// turn, and Refund to give back tokens a request did not use. A call that
// spends locks one stripe, and keys on different stripes never contend; a
// request that a known key's state already denies (one window) takes no
// lock and writes nothing. A known key costs no allocation.
//
// A Store is safe for concurrent use. Create one with New, and Close it if
// it has a background sweeper (keyrate.WithSweepInterval); the zero value
// is not usable (its methods, as a nil Store's, panic: check New's error).
//
// Options and their defaults: WithStripes (DefaultStripes()),
// keyrate.WithClock (clock.System()), keyrate.WithMaxKeys (no cap; a full
// store fails closed with keyrate.ErrStoreFull), keyrate.WithSweepInterval
// (no background sweeper), keyrate.WithEvictionGrace
// (keyrate.DefaultEvictionGrace), keyrate.WithHashedKeys (off),
// keyrate.WithPolicies, keyrate.WithPolicyFunc and keyrate.WithObserver
// (none). The package documentation says how the stripes work, what a key
// costs in memory, and how idle keys are removed without changing any
// decision.
type Store struct {
	pols  *rules.Policies
	seed  flatmap.Seed
	tab   *table // the stripes
	book  sweep.Book
	pacer sweep.Pacer   // paces whole sweeps on refusals by a full store
	grace time.Duration // config.Settings.EvictionGrace
	bg    *sweep.Background
	// refunds is what every refund goes through, so that AllowAll's undo
	// is never fooled by one (multi.Refunds).
	refunds multi.Refunds
}

var (
	_ keyrate.Limiter        = (*Store)(nil)
	_ keyrate.BoundedLimiter = (*Store)(nil)
	_ keyrate.PolicyLimiter  = (*Store)(nil)
	_ keyrate.WaitLimiter    = (*Store)(nil)
)

// settings is the striped store's own configuration.
type settings struct{ stripes int }

// MaxStripes is the most stripes WithStripes accepts.
const MaxStripes = 1 << 20

// DefaultStripes returns the default stripe count: 16 stripes per
// GOMAXPROCS, rounded up to a power of two, so that two goroutines running
// at once rarely want the same stripe.
func DefaultStripes() int { return layout.NextPow2(16 * runtime.GOMAXPROCS(0)) }

// WithStripes sets the number of stripes, a power of two from 1 to
// MaxStripes; any other n makes New fail with an error wrapping
// keyrate.ErrInvalidOption. The default is DefaultStripes(). Each stripe
// takes 192 bytes before it holds a key (three cache lines), and the
// stripes at least 32 KiB together: MaxStripes of them, 192 MiB.
func WithStripes(n int) keyrate.Option {
	return config.StoreOption("striped.WithStripes", func(s *settings) error {
		if n < 1 || n > MaxStripes || n&(n-1) != 0 {
			return fmt.Errorf("stripe count %d is not a power of two from 1 to %d", n, MaxStripes)
		}
		s.stripes = n
		return nil
	})
}

// New returns a store enforcing limit on every key, or the policies of
// keyrate.WithPolicies and keyrate.WithPolicyFunc. It returns an error
// wrapping keyrate.ErrInvalidLimit, keyrate.ErrInvalidPolicy or
// keyrate.ErrInvalidOption if limit, a policy or an option is out of
// range.
func New(limit keyrate.Limit, opts ...keyrate.Option) (*Store, error) {
	own := settings{stripes: DefaultStripes()}
	set, err := config.Configure(&own, opts...)
	if err != nil {
		return nil, err
	}
	pols, err := rules.NewPolicies(limit, set)
	if err != nil {
		return nil, err
	}
	s := &Store{pols: pols, seed: flatmap.MakeSeed()}
	s.tab = newTable(s, own.stripes, set.HashedKeys)
	s.book.Init(set.MaxKeys)
	s.pacer.Init(min(sweep.MinPace, max(set.MaxKeys, 1)))
	s.grace = set.EvictionGrace
	s.bg = sweep.Start(set.SweepInterval, s.routineSweep)
	return s, nil
}

// Allow reports whether one token may be spent for key now, and spends it
// if so. It is shorthand for AllowN(key, 1).Allowed: false also when the
// store is full (keyrate.WithMaxKeys) and key is new, and when the
// function of keyrate.WithPolicyFunc names a policy the store lacks.
func (s *Store) Allow(key string) bool {
	ps := s.pols
	if ps.Observer() != nil {
		return s.allowObserved(key)
	}
	var rs *rules.Rules
	if ps.HasFunc() {
		var err error
		if rs, err = ps.ForKey(key); err != nil {
			return false
		}
	} else {
		rs = ps.Default()
	}
	if rs.Len() == 1 { // the hot path: a known key
		_, _, h, ok, hit := s.takeOne(key, rs, 1, 0)
		if hit {
			return ok
		}
		return s.allowRare(key, h, rs)
	}
	if rs.Unlimited() {
		return true
	}
	return s.allowRare(key, s.seed.Hash(key), rs)
}

// allowRare is Allow's slow path under rs, for key of hash h: a new key,
// or one under another policy or of several windows.
func (s *Store) allowRare(key string, h uint64, rs *rules.Rules) bool {
	_, _, denied, err := s.take(key, h, rs, 1, 0)
	return err == nil && denied < 0
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
	if rs.Unlimited() {
		return rs.UnlimitedDecision(), nil
	}
	var h uint64
	if rs.Len() == 1 { // the hot path: a known key
		state, t, hk, ok, hit := s.takeOne(key, rs, cost, 0)
		if hit {
			r := rs.Rule(0)
			return r.Decide(state, r.Ticks(t), cost, ok), nil
		}
		h = hk
	} else {
		h = s.seed.Hash(key)
	}
	st, at, denied, err := s.take(key, h, rs, cost, 0)
	if err != nil {
		return keyrate.Decision{}, err
	}
	return rs.Decide(st[:rs.Len()], at, cost, denied), nil
}

// take spends cost for key, whose hash is h, under rs, or reserves it
// within wait (see table.take),
// and if the store is full and key new, does what full does.
func (s *Store) take(key string, h uint64, rs *rules.Rules, cost int, wait time.Duration) (sweep.States, time.Duration, int, error) {
	now := rs.Now()
	var (
		st     sweep.States
		denied int
		full   bool
	)
	st, now, denied, full = s.tab.take(s, key, h, rs, now, cost, wait)
	if full {
		return s.full(key, h, rs, now, cost, wait)
	}
	return st, now, denied, nil
}

// full is what a request for a new key does when the store is full and
// its stripe's sample freed nothing: a whole sweep, if one is due
// (sweep.Pacer), else a bounded scan of the other stripes (evictOne); then
// one more try, and refusal if that finds the store full again.
func (s *Store) full(key string, h uint64, rs *rules.Rules, now time.Duration, cost int, wait time.Duration) (sweep.States, time.Duration, int, error) {
	if s.pacer.Charge(sweep.RefusalWeight) {
		s.Sweep()
		s.pacer.Swept()
	} else {
		s.tab.evictOne(s, h)
	}
	var (
		st     sweep.States
		denied int
		full   bool
	)
	st, now, denied, full = s.tab.take(s, key, h, rs, now, cost, wait)
	if full {
		return st, now, 0, s.refuse()
	}
	return st, now, denied, nil
}

// errTableFull is the refusal of a new key by a stripe whose table cannot
// take it (flatmap.Map.Insert) in a store that is not full.
var errTableFull = fmt.Errorf("%w: the key's stripe holds 4 GiB of keys or 65535 policies", keyrate.ErrStoreFull)

// refuse counts a refused request and returns its error: the cap's, or
// errTableFull if the store is not full.
func (s *Store) refuse() error {
	if err := s.book.Refuse(); s.book.Full() && err != nil {
		return err
	}
	return errTableFull
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
	if rs.Len() != 1 {
		return 0, 0, false, false
	}
	state, t, _, ok, hit = s.takeOne(key, rs, cost, rs.Rule(0).WaitTicks(wait))
	return state, t, ok, hit
}

// ReserveRare is the slow path: a new key, or one under another policy
// or of several windows. See sweep.Reserver.
func (f *front) ReserveRare(key string, rs *rules.Rules, cost int, wait time.Duration) (keyrate.Reservation, error) {
	s := (*Store)(f)
	st, at, denied, err := s.take(key, s.seed.Hash(key), rs, cost, max(wait, 0))
	if err != nil {
		return keyrate.Reservation{}, err
	}
	return rs.Reserved(f, key, st[:rs.Len()], at, cost, wait, denied), nil
}

// Cancel is the store's Cancel. See sweep.Reserver.
func (f *front) Cancel(r keyrate.Reservation) bool { return (*Store)(f).Cancel(r) }

// Cancel gives back the tokens of a reservation this store made, if its
// slot has not come and the key's bucket has not changed since. See
// keyrate.Reservation.Cancel.
func (s *Store) Cancel(r keyrate.Reservation) bool {
	return rules.CancelOnce(r, func(rs *rules.Rules) bool {
		key := r.Key()
		return s.tab.cancel(key, s.seed.Hash(key), rs, rules.ReservationEnd(r), r.At(), r.Cost())
	})
}

// Peek reports what a cost-1 request for key would get now, spending
// nothing and storing nothing.
func (s *Store) Peek(key string) keyrate.Decision {
	return s.pols.Peek(key, func(rs *rules.Rules) keyrate.Decision { return s.peek(key, rs) })
}

// PeekTier reports what a cost-1 request for key would get under tier's
// policy, spending nothing. See keyrate.PolicyLimiter.
func (s *Store) PeekTier(key string, tier keyrate.Tier) (keyrate.Decision, error) {
	return s.pols.PeekTier(tier, func(rs *rules.Rules) keyrate.Decision { return s.peek(key, rs) })
}

// peek is Peek under rs.
func (s *Store) peek(key string, rs *rules.Rules) keyrate.Decision {
	if rs.Unlimited() {
		return rs.UnlimitedDecision()
	}
	h := s.seed.Hash(key)
	var (
		st sweep.States
		at time.Duration
	)
	st, at = s.tab.peek(key, h, rs, rs.Now())
	return rs.Peek(st[:rs.Len()], at)
}

// Tier returns a handle on the policy named name. See
// keyrate.PolicyLimiter.
func (s *Store) Tier(name string) (keyrate.Tier, error) { return s.pols.Tier(name) }

// Refund gives cost tokens back to key. See keyrate.PolicyLimiter.
func (s *Store) Refund(key string, cost int) error {
	rs, err := s.pols.ForKey(key)
	if err != nil {
		return err
	}
	return s.refund(key, rs, cost)
}

// RefundTier gives cost tokens back to key under tier's policy. See
// keyrate.PolicyLimiter.
func (s *Store) RefundTier(key string, tier keyrate.Tier, cost int) error {
	rs, err := s.pols.Rules(tier)
	if err != nil {
		return err
	}
	return s.refund(key, rs, cost)
}

// refund is Refund under rs.
func (s *Store) refund(key string, rs *rules.Rules, cost int) error {
	if err := rs.CheckCost(cost); err != nil || rs.Unlimited() {
		return err
	}
	h := s.seed.Hash(key)
	s.refunds.Begin()
	s.tab.refund(key, h, rs, rs.Now(), cost)
	s.refunds.End()
	return nil
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

// Len returns the number of keys the store tracks: a snapshot of one
// instant, never above keyrate.WithMaxKeys's cap, kept in one counter
// rather than summed over the stripes (which would lock one stripe at a
// time, and could count a key evicted from one stripe and the key inserted
// in its place in another).
func (s *Store) Len() int { return s.book.Keys() }

// Sweep removes every key whose bucket is full now, stripe by stripe, and
// returns how many it removed. See keyrate.BoundedLimiter.
func (s *Store) Sweep() int { return s.sweepAt(s.pols.Now()) }

// routineSweep is a background sweep: it removes the keys whose buckets
// have been full for the grace period, or every full one if the store is
// full.
func (s *Store) routineSweep() { s.sweepAt(s.routine(s.pols.Now())) }

// routine returns the reading routine maintenance at reading now evicts
// at: now less the grace period, unless the store is full.
func (s *Store) routine(now time.Duration) time.Duration {
	if s.book.Full() {
		return now
	}
	return sweep.Grace(now, s.grace)
}

// sweepAt removes every key whose bucket is full at reading now.
func (s *Store) sweepAt(now time.Duration) int {
	var n, left int
	n, left = s.tab.sweep(s, now)
	s.pacer.Reset(left)
	return n
}

// Stats returns a snapshot of the store's bookkeeping.
func (s *Store) Stats() keyrate.Stats { return s.book.Stats() }

// Close stops the background sweeper, if any. It is safe to call more than
// once, and always returns nil. See keyrate.BoundedLimiter.
func (s *Store) Close() error {
	s.bg.Stop()
	return nil
}
