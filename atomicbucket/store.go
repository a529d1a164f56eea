// Package atomicbucket is the lock-free keyrate store: each bucket is one
// 64-bit word updated with compare-and-swap.
package atomicbucket

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/retries"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/sweep"
)

// Store is a keyrate.Limiter that keeps each key's packed state (see the
// keyrate package documentation) in an atomic.Uint64, in an xsync.MapOf
// from key to word.
//
// A call looks the key up (lock-free for a known key), reads the clock and
// runs a compare-and-swap loop: load the word, apply keyrate's shared
// transition, and swap the result in if no other goroutine changed the word
// meanwhile, else retry with the fresh word. A denied request writes
// nothing, so a hot key that is being denied is read-shared by every core.
// The reading of now is not retaken on a retry: a stale reading can only
// find fewer tokens (see the keyrate package documentation), so the loop
// never over-admits.
//
// # Memory
//
// The store removes the words of idle keys exactly: only a word that is
// full again (idle for at least Limit.FillTime since it was last emptied),
// which is indistinguishable from a new one. The sweep swaps such a word to
// a tombstone, a value no live word holds, with one compare-and-swap from the very value it judged
// full, then deletes it from the map; a spend's compare-and-swap therefore
// either lands before the mark (and the sweep leaves the word alone) or
// finds the mark and looks the key up again, so no spend is ever lost.
//
// A sweep falls due after as many insertions of new keys as the previous
// one left keys (amortised one key examined per insertion) and runs on a
// short-lived goroutine of its own, holding one lock at a time, so that no
// request pays for walking the map; inserters wait for it only if it falls
// a whole period behind. Sweeps also run in the background with
// keyrate.WithSweepInterval, and on demand with Sweep.
//
// keyrate.WithMaxKeys caps the keys tracked: a new key that finds the
// store full examines at most 64 words for one it can evict, or that a
// sweep is removing (and starts a whole sweep at most once per cap/16
// such refusals), tries once more for a slot, and otherwise fails closed
// with keyrate.ErrStoreFull. Len and Stats.Keys read one counter, a
// snapshot never above the cap. keyrate.WithHashedKeys keeps a seeded
// 64-bit hash instead of each key. See package internal/sweep for the
// argument that eviction never changes a decision.
//
// A Store is safe for concurrent use. Create one with New, and Close it
// when done with it (Close stops the background sweeper and waits for a
// sweep in flight); the zero value is not usable. Known keys
// cost no allocation; each new key allocates one bucket (the word and its
// policy; a key of several windows, an array of its other states too). Options:
// keyrate.WithClock (default clock.System()), keyrate.WithMaxKeys (default
// no cap), keyrate.WithSweepInterval (default no background sweeper) and
// keyrate.WithHashedKeys (default off).
//
// # Policies
//
// The store implements keyrate.PolicyLimiter: keyrate.WithPolicies (default
// none besides the Limit given to New) and keyrate.WithPolicyFunc (default:
// the default policy for every key) give it tiers and policies of several
// windows, SetPolicy changes them at runtime, Refund gives tokens back.
//
// # Waiting
//
// The store implements keyrate.WaitLimiter. A reservation of a one-window
// key is the same compare-and-swap loop as a spend, with the bucket's
// arrival time allowed past its fill time by the maximum wait
// (see keyrate.WaitLimiter): lock-free, and no slower than AllowN. Wait
// creates no timer when the tokens are there, and otherwise sleeps on the
// store's clock on the caller's goroutine; Cancel is one more
// compare-and-swap, from the very state the reservation left.
type Store struct {
	pols  *rules.Policies
	strs  *xsync.MapOf[string, *bucket] // words.Strings(), for the hot path
	words sweep.Map[*bucket]
}

// bucket is one key's packed states under one policy. Window 0's state
// is the atomic word w: rules.Tombstone once swept, and sweep.Fresh
// until first spent from. A one-window bucket is just that word, updated
// by compare-and-swap. A bucket of several windows keeps windows 1 and on
// in rest, and uses w as its lock as well: a call swaps w to locked (from
// the state it read), reads and writes every window, and releases the lock
// by storing window 0's new state in w.
type bucket struct {
	rules *rules.Rules
	w     atomic.Uint64
	rest  *[keyrate.MaxLimits - 1]rules.State // guarded by the lock in w
}

// locked is w's value while a call holds a bucket of several windows.
const locked = uint64(sweep.Fresh - 1)

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
// range. The store keeps one word per window, and so refuses
// keyrate.SlidingLog, here and in SetPolicy, with an error wrapping
// keyrate.ErrUnsupportedAlgorithm.
func New(limit keyrate.Limit, opts ...keyrate.Option) (*Store, error) {
	s := new(Store)
	if err := s.words.Init(&s.pols, limit, opts, newBucket); err != nil {
		return nil, err
	}
	if err := s.pols.RefuseLog("atomicbucket"); err != nil {
		s.words.Close() // stops a background sweeper
		return nil, err
	}
	s.strs = s.words.Strings()
	return s, nil
}

// newBucket returns a new bucket under rs in states st (Fresh if nil).
func newBucket(rs *rules.Rules, st []rules.State) *bucket {
	b := &bucket{rules: rs}
	if rs.Len() > 1 {
		b.rest = new([keyrate.MaxLimits - 1]rules.State)
	}
	if st == nil {
		b.w.Store(uint64(sweep.Fresh))
		return b
	}
	b.w.Store(uint64(st[0]))
	if b.rest != nil {
		copy(b.rest[:], st[1:])
	}
	return b
}

// Rules returns the policy b is under. See sweep.Bucket.
func (b *bucket) Rules() *rules.Rules { return b.rules }

// lock takes the lock of a bucket of several windows and returns window
// 0's state, or reports swept.
func (b *bucket) lock() (v rules.State, swept bool) {
	for {
		old := b.w.Load()
		switch old {
		case uint64(rules.Tombstone):
			return 0, true
		case locked:
			runtime.Gosched() // held for a few loads and stores
			continue
		}
		if b.w.CompareAndSwap(old, locked) {
			return rules.State(old), false
		}
	}
}

// load copies the states of a locked bucket into s, window 0's being v.
func (b *bucket) load(v rules.State, s []rules.State) {
	s[0] = v
	copy(s[1:], b.rest[:len(s)-1])
}

// unlock stores the states s into a locked bucket and releases it.
func (b *bucket) unlock(s []rules.State) {
	copy(b.rest[:len(s)-1], s[1:])
	b.w.Store(uint64(s[0]))
}

// Evict marks b swept if every window is full at reading t. See
// sweep.Bucket.
func (b *bucket) Evict(t time.Duration, floor *sweep.Floor) bool {
	if b.rest == nil {
		r := b.rules.Rule(0)
		now := r.Ticks(t)
		for {
			old := b.w.Load()
			if rules.State(old) >= sweep.Fresh || !r.Full(rules.State(old), now) {
				return false
			}
			floor.Raise(r.Reading(rules.State(old))) // harmless if the swap then fails
			if b.w.CompareAndSwap(old, uint64(rules.Tombstone)) {
				return true
			}
		}
	}
	if v := b.w.Load(); v >= uint64(sweep.Fresh)-1 { // locked, fresh or swept: not full
		return false
	}
	v, swept := b.lock()
	if swept {
		return false
	}
	var s [keyrate.MaxLimits]rules.State
	n := b.rules.Len()
	b.load(v, s[:n])
	if v == sweep.Fresh || !b.rules.Full(s[:n], t) {
		b.w.Store(uint64(v))
		return false
	}
	floor.Raise(b.rules.Reading(s[:n]))
	b.w.Store(uint64(rules.Tombstone))
	return true
}

// spend runs the CAS loop on a one-window bucket under r at tick now: it
// spends cost tokens if the bucket holds them (or reserves them, if they
// are there within wait ticks: rules.Rule.Reserve) and returns the state
// after the call. It returns sweep.Fresh, and does nothing, if b is swept or not
// spent from yet: SpendRare's case. It calls nothing: the token bucket's
// arithmetic and the count of a failed swap (internal/retries) are
// inlined, so that it needs no stack frame.
func spend(r *rules.Rule, b *bucket, now uint64, cost int, wait uint64) (rules.State, bool) {
	for {
		old := rules.State(b.w.Load())
		if old >= sweep.Fresh {
			return sweep.Fresh, false
		}
		next, ok := r.ReserveBucket(old, now, cost, wait)
		if !ok || b.w.CompareAndSwap(uint64(old), uint64(next)) {
			return next, ok
		}
		retries.Add(now)
	}
}

// spendWindow is spend for a rule of a window algorithm: the same loop,
// over rules.Rule.Reserve, which is not inlined (spend's loop keeps the
// token bucket's arithmetic inlined, and calls nothing).
func spendWindow(r *rules.Rule, b *bucket, now uint64, cost int, wait uint64) (rules.State, bool) {
	for {
		old := rules.State(b.w.Load())
		if old >= sweep.Fresh {
			return sweep.Fresh, false
		}
		next, ok := r.Reserve(old, now, cost, wait)
		if !ok || b.w.CompareAndSwap(uint64(old), uint64(next)) {
			return next, ok
		}
		retries.Add(now)
	}
}

// SpendRare spends from a bucket that may be swept (it reports swept and
// does nothing), not spent from yet (it reads as the floor), or of several
// windows. See sweep.Bucket.
func (b *bucket) SpendRare(t time.Duration, cost int, wait time.Duration, floor *sweep.Floor) (s sweep.States, at time.Duration, denied int, swept bool) {
	if b.rest != nil {
		v, swept := b.lock()
		if swept {
			return s, t, 0, true
		}
		n := b.rules.Len()
		if v == sweep.Fresh {
			t = floor.Start(b.rules, t, s[:n])
		} else {
			b.load(v, s[:n])
		}
		_, denied := b.rules.Reserve(s[:n], t, cost, wait) // a denied first spend keeps the floor: so that it can be swept
		b.unlock(s[:n])
		return s, t, denied, false
	}
	r := b.rules.Rule(0)
	for {
		old := rules.State(b.w.Load())
		at, state := t, old
		switch old {
		case rules.Tombstone:
			return s, t, 0, true
		case sweep.Fresh:
			at = floor.Start(b.rules, t, s[:1])
			state = s[0]
		}
		next, ok := r.Reserve(state, r.Ticks(at), cost, r.WaitTicks(wait))
		if !ok {
			if old != sweep.Fresh {
				s[0] = old
				return s, at, 0, false
			}
			next = state // the floor, if a first spend is denied: so that it can be swept
		}
		if b.w.CompareAndSwap(uint64(old), uint64(next)) {
			s[0] = next
			if ok {
				return s, at, -1, false
			}
			return s, at, 0, false
		}
	}
}

// Refund gives cost tokens back to b. See sweep.Bucket.
func (b *bucket) Refund(t time.Duration, cost int) bool {
	if b.rest != nil {
		v, swept := b.lock()
		if swept {
			return true
		}
		var s [keyrate.MaxLimits]rules.State
		n := b.rules.Len()
		b.load(v, s[:n])
		if v != sweep.Fresh {
			b.rules.Refund(s[:n], t, cost)
		}
		b.unlock(s[:n])
		return false
	}
	r := b.rules.Rule(0)
	now := r.Ticks(t)
	for {
		old := rules.State(b.w.Load())
		switch old {
		case rules.Tombstone:
			return true
		case sweep.Fresh:
			return false
		}
		if b.w.CompareAndSwap(uint64(old), uint64(r.Refund(old, now, cost))) {
			return false
		}
	}
}

// Cancel gives back a reservation's tokens if b allows it. See
// sweep.Bucket.
func (b *bucket) Cancel(end rules.State, slot time.Duration, cost int) bool {
	var s [keyrate.MaxLimits]rules.State
	if b.rest != nil {
		v, swept := b.lock()
		if swept {
			return false
		}
		n := b.rules.Len()
		b.load(v, s[:n])
		ok := v != sweep.Fresh && b.rules.Cancel(s[:n], end, b.rules.Now(), slot, cost)
		b.unlock(s[:n])
		return ok
	}
	for {
		old := rules.State(b.w.Load())
		if old >= sweep.Fresh {
			return false
		}
		s[0] = old
		// The clock is read after the load: no request decided before
		// it holds a later reading (see rules.Rule.Cancel).
		if !b.rules.Cancel(s[:1], end, b.rules.Now(), slot, cost) {
			return false
		}
		if b.w.CompareAndSwap(uint64(old), uint64(s[0])) {
			return true
		}
	}
}

// Retire marks b swept and returns its states. See sweep.Bucket.
func (b *bucket) Retire() (s sweep.States, fresh, ok bool) {
	if b.rest != nil {
		v, swept := b.lock()
		if swept {
			return s, false, false
		}
		if v != sweep.Fresh {
			b.load(v, s[:b.rules.Len()])
		}
		b.w.Store(uint64(rules.Tombstone))
		return s, v == sweep.Fresh, true
	}
	for {
		old := rules.State(b.w.Load())
		if old == rules.Tombstone {
			return s, false, false
		}
		if b.w.CompareAndSwap(uint64(old), uint64(rules.Tombstone)) {
			s[0] = old
			return s, old == sweep.Fresh, true
		}
	}
}

// Swept reports whether b is swept. See sweep.Bucket.
func (b *bucket) Swept() bool { return b.w.Load() == uint64(rules.Tombstone) }

// States returns b's states. See sweep.Bucket.
func (b *bucket) States() (s sweep.States, live bool) {
	if b.rest == nil {
		v := rules.State(b.w.Load())
		s[0] = v
		return s, v < sweep.Fresh
	}
	v, swept := b.lock()
	if swept {
		return s, false
	}
	b.load(v, s[:b.rules.Len()])
	b.w.Store(uint64(v))
	return s, v != sweep.Fresh
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
		if b, ok := s.strs.Load(key); ok && b.rules == rs {
			r := rs.Rule(0)
			state, ok := rules.State(0), false
			if rs.OneBucket() {
				state, ok = spend(r, b, r.Now(), 1, 0)
			} else {
				state, ok = spendWindow(r, b, r.Now(), 1, 0)
			}
			if state != sweep.Fresh {
				return ok
			}
		}
	}
	return s.words.Allow(key, rs)
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
		if b, ok := s.strs.Load(key); ok && b.rules == rs {
			r := rs.Rule(0)
			now := r.Now()
			state, ok := rules.State(0), false
			if rs.OneBucket() {
				state, ok = spend(r, b, now, cost, 0)
			} else {
				state, ok = spendWindow(r, b, now, cost, 0)
			}
			if state != sweep.Fresh {
				return r.Decide(state, now, cost, ok), nil
			}
		}
	}
	return s.words.AllowN(key, rs, cost)
}

// Reserve reserves cost tokens of key for the earliest slot at most
// maxWait away: one compare-and-swap for a known key. See keyrate.WaitLimiter.
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
	if !found || b.rules != rs {
		return 0, 0, false, false
	}
	r := rs.Rule(0)
	t = rs.Now()
	if rs.OneBucket() {
		state, ok = spend(r, b, r.Ticks(t), cost, r.WaitTicks(wait))
	} else {
		state, ok = spendWindow(r, b, r.Ticks(t), cost, r.WaitTicks(wait))
	}
	if state != sweep.Fresh {
		return state, t, ok, true
	}
	return 0, 0, false, false
}

// ReserveRare is the slow path. See sweep.Reserver.
func (f *front) ReserveRare(key string, rs *rules.Rules, cost int, wait time.Duration) (keyrate.Reservation, error) {
	return f.words.Reserve(f, key, rs, cost, wait)
}

// Cancel is the store's Cancel. See sweep.Reserver.
func (f *front) Cancel(r keyrate.Reservation) bool { return (*Store)(f).Cancel(r) }

// Cancel gives back the tokens of a reservation this store made, if its
// slot has not come and the key's bucket has not changed since. See
// keyrate.Reservation.Cancel.
func (s *Store) Cancel(r keyrate.Reservation) bool { return s.words.Cancel(r) }

// Peek reports what a cost-1 request for key would get now, spending
// nothing and storing nothing.
func (s *Store) Peek(key string) keyrate.Decision { return s.words.PeekKey(key) }

// Tier returns a handle on the policy named name. See
// keyrate.PolicyLimiter.
func (s *Store) Tier(name string) (keyrate.Tier, error) { return s.pols.Tier(name) }

// Refund gives cost tokens back to key. See keyrate.PolicyLimiter.
func (s *Store) Refund(key string, cost int) error { return s.words.RefundKey(key, cost) }

// RefundTier gives cost tokens back to key under tier's policy. See
// keyrate.PolicyLimiter.
func (s *Store) RefundTier(key string, tier keyrate.Tier, cost int) error {
	return s.words.RefundTier(key, tier, cost)
}

// SetPolicy adds or replaces a policy at runtime. See
// keyrate.PolicyLimiter.
func (s *Store) SetPolicy(p keyrate.Policy) error { return s.pols.Set(p) }

// Policies returns the policies the store enforces now.
func (s *Store) Policies() []keyrate.Policy { return s.pols.List() }

// Len returns the number of keys the store tracks.
func (s *Store) Len() int { return s.words.Len() }

// Sweep removes the word of every key that is full now, and returns how
// many it removed. See keyrate.BoundedLimiter.
func (s *Store) Sweep() int { return s.words.Sweep() }

// Stats returns a snapshot of the store's bookkeeping.
func (s *Store) Stats() keyrate.Stats { return s.words.Stats() }

// Close stops the background sweeper, if any, and waits for a sweep in
// flight. It is safe to call more than once, and always returns nil. See
// keyrate.BoundedLimiter.
func (s *Store) Close() error { return s.words.Close() }
