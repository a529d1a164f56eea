package atomicbucket

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/casmap"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/handle"
	"github.com/keyrate/keyrate/internal/layout"
	"github.com/keyrate/keyrate/internal/multi"
	"github.com/keyrate/keyrate/internal/retries"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/sweep"
)

// Store is the lock-free keyrate store: every key's state is a 64-bit
// word of a pointer-free table, updated by compare-and-swap. It implements
// keyrate.Limiter, keyrate.PolicyLimiter (tiers, policies of several
// windows, SetPolicy, Refund), keyrate.WaitLimiter (Reserve, Wait, Cancel)
// and keyrate.BoundedLimiter (Len, Sweep, Stats, Close).
//
// Call Allow or AllowN on the request path (AllowTier under a tier), Peek
// to look without spending, Wait or Reserve where a caller may wait its
// turn, and Refund to give back tokens a request did not use. A known
// one-window key costs no allocation and no lock, one compare-and-swap;
// a denied request writes nothing.
//
// A Store is safe for concurrent use. Create one with New, and Close it if
// it has a background sweeper (keyrate.WithSweepInterval); the zero value
// is not usable (its methods, as a nil Store's, panic: check New's error).
// It does not run keyrate.SlidingLog (New and SetPolicy return
// keyrate.ErrUnsupportedAlgorithm; mutexbucket and striped do).
//
// Options and their defaults: keyrate.WithClock (clock.System()),
// keyrate.WithMaxKeys (no cap; a full store fails closed with
// keyrate.ErrStoreFull), keyrate.WithSweepInterval (no background
// sweeper), keyrate.WithEvictionGrace (keyrate.DefaultEvictionGrace),
// keyrate.WithHashedKeys (off), keyrate.WithPolicies,
// keyrate.WithPolicyFunc and keyrate.WithObserver (none), and this
// package's WithHotKeys (none). The package
// documentation says how the table works, what a key costs in memory, and
// how idle keys are removed without changing any decision.
type Store struct {
	pols  *rules.Policies
	m     casmap.Map
	floor sweep.Floor // the latest reading an evicted key was full at
	book  sweep.Book
	pacer sweep.Pacer   // paces whole sweeps on refusals by a full store
	grace time.Duration // config.Settings.EvictionGrace
	bg    *sweep.Background
	hot   *hotSet // WithHotKeys; nil for none
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

// segments returns the segment count: 4 per GOMAXPROCS, rounded up to a
// power of two. A segment's lock is taken only by writers (new keys,
// removals, rebuilds), so fewer suffice than the striped store's stripes.
func segments() int { return layout.NextPow2(4 * runtime.GOMAXPROCS(0)) }

// sampled is how many keys of its segment an insertion examines for
// eviction (see the Store documentation).
const sampled = 16

// New returns a store enforcing limit on every key, or the policies of
// keyrate.WithPolicies and keyrate.WithPolicyFunc. It returns an error
// wrapping keyrate.ErrInvalidLimit, keyrate.ErrInvalidPolicy or
// keyrate.ErrInvalidOption if limit, a policy or an option is out of
// range. The store keeps one word per window, and so refuses
// keyrate.SlidingLog, here and in SetPolicy, with an error wrapping
// keyrate.ErrUnsupportedAlgorithm.
func New(limit keyrate.Limit, opts ...keyrate.Option) (*Store, error) {
	var own settings
	set, err := config.Configure(&own, opts...)
	if err != nil {
		return nil, err
	}
	pols, err := rules.NewPolicies(limit, set)
	if err != nil {
		return nil, err
	}
	if err := pols.RefuseLog("atomicbucket"); err != nil {
		return nil, err
	}
	s := &Store{pols: pols, grace: set.EvictionGrace, hot: newHotSet(own)}
	s.m.Init(segments(), set.HashedKeys)
	if s.hot != nil {
		s.hot.home(&s.m)
	}
	s.book.Init(set.MaxKeys)
	s.pacer.Init(min(sweep.MinPace, max(set.MaxKeys, 1)))
	s.bg = sweep.Start(set.SweepInterval, s.routineSweep)
	return s, nil
}

// lookup returns key's hash, and its live slot and policy or nil and
// nil, without taking a lock: the hot path's lookup.
func (s *Store) lookup(key string) (*casmap.Slot, *rules.Rules, uint64) {
	if casmap.Short(key) {
		return s.m.Lookup(key)
	}
	h := s.m.Hash(key)
	slot, rs := s.m.LookupLong(key, h)
	return slot, rs, h
}

// spend runs the CAS loop on a one-window slot under r at tick now: it
// spends cost tokens if the bucket holds them (or reserves them, if they
// are there within wait ticks: rules.Rule.Reserve) and returns the state
// after the call. It returns the sentinel it found, and does nothing, if
// the slot is dead or moved (a state at or above casmap.Moved). It calls
// nothing: the token bucket's arithmetic and the count of a failed swap
// (internal/retries) are inlined, so that it needs no stack frame.
func spend(r *rules.Rule, ref *casmap.Slot, now uint64, cost int, wait uint64) (rules.State, bool) {
	for {
		old := ref.Load()
		if old >= casmap.Moved {
			return old, false
		}
		next, ok := r.ReserveBucket(old, now, cost, wait)
		if !ok || ref.CompareAndSwap(old, next) {
			return next, ok
		}
		retries.Add(now)
	}
}

// spendWindow is spend for a rule of a window algorithm: the same loop,
// over rules.Rule.Reserve, which is not inlined (spend's loop keeps the
// token bucket's arithmetic inlined, and calls nothing).
func spendWindow(r *rules.Rule, ref *casmap.Slot, now uint64, cost int, wait uint64) (rules.State, bool) {
	for {
		old := ref.Load()
		if old >= casmap.Moved {
			return old, false
		}
		next, ok := r.Reserve(old, now, cost, wait)
		if !ok || ref.CompareAndSwap(old, next) {
			return next, ok
		}
		retries.Add(now)
	}
}

// spendOne spends (or reserves) cost from ref, a slot of rs, at reading t
// within wait, and writes the states after the call into s. It returns
// rules.Rules.Take's result and the sentinel (rules.Tombstone or
// casmap.Moved) it found instead, if any, having done nothing.
func spendOne(ref casmap.Ref, rs *rules.Rules, t time.Duration, cost int, wait time.Duration, s *sweep.States) (denied int, sentinel rules.State) {
	n := rs.Len()
	if n == 1 {
		r := rs.Rule(0)
		state, ok := spendWindow(r, ref.Slot(), r.Ticks(t), cost, r.WaitTicks(wait))
		if state >= casmap.Moved {
			return 0, state
		}
		s[0] = state
		return sweep.Denied(ok), 0
	}
	return spendMany(ref, rs, t, cost, wait, s)
}

// spendMany is spendOne for ref, a slot of rs's several windows, which
// its word locks (casmap.Ref.Hold).
func spendMany(ref casmap.Ref, rs *rules.Rules, t time.Duration, cost int, wait time.Duration, s *sweep.States) (denied int, sentinel rules.State) {
	held, sentinel := ref.Hold(s[:rs.Len()])
	if sentinel != 0 {
		return 0, sentinel
	}
	return spendHeld(held, rs, t, cost, wait, s), 0
}

// spendHeld spends (or reserves) cost from the states s of a slot of rs's
// several windows, held locked, at reading t within wait, writes them
// back and lets go of the lock: a denied request writes back window 0's
// word alone, as its states are left as they were. It returns
// rules.Rules.Take's result.
func spendHeld(held casmap.Held, rs *rules.Rules, t time.Duration, cost int, wait time.Duration, s *sweep.States) (denied int) {
	n := rs.Len()
	if _, denied = rs.Reserve(s[:n], t, cost, wait); denied >= 0 {
		held.Release(s[0])
	} else {
		held.Unlock(s[:n])
	}
	return denied
}

// spendSlot is the hot path's spend of cost from slot, a known key's slot
// of rs's several windows, which Lookup found for hash h, at reading t
// (taken after the lookup): it writes the states after the call into s
// (if s is not nil) and returns rules.Rules.Take's result, or the
// sentinel it found, having done nothing.
//
// A request that window 0's word, read without the lock (and after t, as
// the lock is taken after it), already denies is denied there when its
// caller needs no Decision (s is nil: Allow), taking no lock and writing
// nothing: rules.Rules.Take denies a request that any window denies.
// Every other request, a deny by a later window included, is decided
// under the lock.
//
// A policy of token buckets alone (rules.Rules.Buckets) is decided here
// with rules.Rule.TakeAt, window by window, in one frame: window 0 from the
// word it loaded (its new state kept for the unlock), the record's other
// windows located before the lock and decided under it, all or nothing, as
// rules.Rules.Spend does. Other policies go to spendSlotHeld.
func (st *Store) spendSlot(slot *casmap.Slot, key string, h uint64, rs *rules.Rules, t time.Duration, cost int, s *sweep.States) (denied int, sentinel rules.State) {
	if !rs.Buckets() {
		return st.spendSlotHeld(slot, key, h, rs, t, cost, s)
	}
	e := rs.Elapsed(t)
	r0 := rs.Rule(0)
	v := slot.Load()
	var next0 rules.State
	var rest casmap.Rest
	ok := false
	if v < casmap.Moved { // live and not locked
		if next0, ok = r0.TakeAt(v, e, cost); !ok && s == nil {
			return 0, 0
		}
		// Located before the lock, so that the lock is held for less
		// (see casmap.Map.Rest).
		rest = st.m.Rest(slot, key, h)
		if !slot.CompareAndSwap(v, casmap.Locked) {
			v = casmap.Locked // take the lock below
		}
	}
	if v >= casmap.Moved {
		if v, sentinel = slot.Lock(); sentinel != 0 {
			return 0, sentinel
		}
		next0, ok = r0.TakeAt(v, e, cost)
		rest = st.m.Rest(slot, key, h)
	}
	n := rs.Len()
	var last rules.State // window n-1's state after the spend
	if ok {
		for denied = 1; denied < n; denied++ {
			if last, ok = rs.Rule(denied).TakeAt(rest.Load(denied), e, cost); !ok {
				break
			}
		}
	}
	if !ok {
		if s != nil { // read while the lock is held
			s[0] = v
			for i := 1; i < n; i++ {
				s[i] = rest.Load(i)
			}
		}
		slot.Release(v) // a deny leaves every state as it was
		return denied, 0
	}
	// Every window holds cost: the windows between 0 and n-1 are
	// computed again, as only the last one's new state was kept.
	for i := 1; i < n-1; i++ {
		next, _ := rs.Rule(i).TakeAt(rest.Load(i), e, cost)
		rest.Store(i, next)
		if s != nil {
			s[i] = next
		}
	}
	rest.Store(n-1, last)
	slot.Release(next0)
	if s != nil {
		s[0], s[n-1] = next0, last
	}
	return -1, 0
}

// spendSlotHeld is spendSlot for a policy with a window algorithm among
// its windows: rules.Rules.Spend over the states casmap.Map.HoldSlot
// copies out under the lock.
func (st *Store) spendSlotHeld(slot *casmap.Slot, key string, h uint64, rs *rules.Rules, t time.Duration, cost int, s *sweep.States) (denied int, sentinel rules.State) {
	if s == nil {
		if v := slot.Load(); v < casmap.Moved { // live and not locked
			// Rules.Reserve counts t clamped to window 0's clock
			// range, which is where window 0's Ticks counts it too.
			r := rs.Rule(0)
			var ok bool
			if r.Algorithm() == keyrate.TokenBucket {
				_, ok = r.ReserveBucket(v, r.Ticks(t), cost, 0)
			} else {
				_, ok = r.Reserve(v, r.Ticks(t), cost, 0)
			}
			if !ok {
				return 0, 0
			}
		}
		s = new(sweep.States) // on the stack: spendSlot is not inlined
	}
	n := rs.Len()
	held, sentinel := st.m.HoldSlot(slot, key, h, s[:n])
	if sentinel != 0 {
		return 0, sentinel
	}
	if denied = rs.Spend(s[:n], t, cost); denied >= 0 {
		held.Release(s[0]) // a deny leaves every state as it was
	} else {
		held.Unlock(s[:n])
	}
	return denied, 0
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
	if rs.Unlimited() {
		return true
	}
	if s.hot != nil {
		if ok, done := s.allowHot(key, rs, 1); done {
			return ok
		}
	}
	// The hot path: a known key.
	var h uint64
	var slot *casmap.Slot
	var of *rules.Rules
	if casmap.Short(key) { // s.lookup, inlined by hand: one call on the hot path
		slot, of, h = s.m.Lookup(key)
	} else {
		h = s.m.Hash(key)
		slot, of = s.m.LookupLong(key, h)
	}
	if of == rs {
		if rs.Len() == 1 {
			r := rs.Rule(0)
			state, ok := rules.State(0), false
			if rs.OneBucket() {
				state, ok = spend(r, slot, r.Now(), 1, 0)
			} else {
				state, ok = spendWindow(r, slot, r.Now(), 1, 0)
			}
			if state < casmap.Moved {
				return ok
			}
		} else if denied, sentinel := s.spendSlot(slot, key, h, rs, rs.Now(), 1, nil); sentinel == 0 {
			return denied < 0
		}
	}
	if h == 0 { // not hashed yet (or hashed to 0, and hashed again alike)
		h = s.m.Hash(key)
	}
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
	if s.hot != nil {
		if d, done := s.decideHot(key, rs, cost); done {
			return d, nil
		}
	}
	// The hot path: a known key.
	var h uint64
	var slot *casmap.Slot
	var of *rules.Rules
	if casmap.Short(key) { // s.lookup, inlined by hand: one call on the hot path
		slot, of, h = s.m.Lookup(key)
	} else {
		h = s.m.Hash(key)
		slot, of = s.m.LookupLong(key, h)
	}
	if of == rs {
		if rs.Len() == 1 {
			r := rs.Rule(0)
			now := r.Now()
			state, ok := rules.State(0), false
			if rs.OneBucket() {
				state, ok = spend(r, slot, now, cost, 0)
			} else {
				state, ok = spendWindow(r, slot, now, cost, 0)
			}
			if state < casmap.Moved {
				return r.Decide(state, now, cost, ok), nil
			}
		} else {
			var st sweep.States
			t := rs.Now() // read after the lookup, as takeOnce reads it
			if denied, sentinel := s.spendSlot(slot, key, h, rs, t, cost, &st); sentinel == 0 {
				return rs.Decide(st[:rs.Len()], t, cost, denied), nil
			}
		}
	}
	if h == 0 { // not hashed yet (or hashed to 0, and hashed again alike)
		h = s.m.Hash(key)
	}
	st, at, denied, err := s.take(key, h, rs, cost, 0)
	if err != nil {
		return keyrate.Decision{}, err
	}
	return rs.Decide(st[:rs.Len()], at, cost, denied), nil
}

// take spends cost for key, whose hash is h, under rs, or reserves it
// within wait (see takeOnce), and if the store is full and key new, does
// what full does.
func (s *Store) take(key string, h uint64, rs *rules.Rules, cost int, wait time.Duration) (sweep.States, time.Duration, int, error) {
	st, at, denied, full := s.takeOnce(key, h, rs, cost, wait)
	if full {
		return s.full(key, h, rs, cost, wait)
	}
	return st, at, denied, nil
}

// takeOnce is the slow path of a spend or reservation: it spends cost
// tokens for key under rs at a fresh reading if every window of its
// bucket holds them (or reserves them within wait: rules.Rules.Reserve),
// and returns the states after the call, the reading it was decided at
// and rules.Rules.Take's result. A known key under rs is spent from
// without a lock (waiting for a rebuild of its segment if it finds its
// slot moved); anything else is done under the segment's lock (locked).
// It reports full, and does nothing, when key is new and the cap (or its
// segment's table) leaves no room for it.
func (s *Store) takeOnce(key string, h uint64, rs *rules.Rules, cost int, wait time.Duration) (st sweep.States, at time.Duration, denied int, full bool) {
	sg := s.m.Segment(h)
	for {
		ref := s.m.Find(sg, key, h)
		// Read after the lookup: a key that replaced a removed one is
		// then spent at a reading no older than the sweep's.
		t := rs.Now()
		if ref.Rules() != rs { // missing, or under another policy
			return s.locked(sg, key, h, rs, t, cost, wait)
		}
		denied, sentinel := spendOne(ref, rs, t, cost, wait, &st)
		switch sentinel {
		case 0:
			return st, t, denied, false
		case casmap.Moved:
			sg.Wait()
		}
		// Moved or removed meanwhile: look the key up again.
	}
}

// locked is takeOnce for a key that was missing from its segment sg or
// under another policy than rs, at reading t, under sg's lock.
//
// A missing key is a bucket in the floor's states: a full bucket at every
// reading from the floor on, where it agrees with every evicted bucket,
// and before it (a clock stepped back) one with fewer tokens than theirs.
// The reading t was taken before the lock, so it may predate a sweep that
// ran while this call waited and evicted this very key: if it is older
// than the floor it is read again, under the lock (sweep.Floor.Start),
// and so no older than the sweep's reading, at which the evicted bucket
// was full, for a clock that never runs backwards. (The clock is read
// under the lock only then: a test's hook clock runs a sweep at a call's
// first reading.) The key is inserted in the states after the spend,
// unless the spend is denied (which it can be only under a clock stepped
// back past the floor).
// Before inserting, it examines sampled keys of sg and evicts those that
// have been full for the grace period (any full one if the store is
// full). A key under another policy is carried over to rs
// (rules.Rules.Carry) into a new slot, and its old slot retired; the
// carry and the spend after it are made at a reading taken once the old
// slot is retired, as carry's are, and no older than t.
func (s *Store) locked(sg *casmap.Segment, key string, h uint64, rs *rules.Rules, t time.Duration, cost int, wait time.Duration) (st sweep.States, at time.Duration, denied int, full bool) {
	sg.Lock()
	defer sg.Unlock()
	n := rs.Len()
	ref := s.m.Find(sg, key, h) // live and not moving: both take this lock
	switch from := ref.Rules(); {
	case from == rs:
		denied, _ = spendOne(ref, rs, t, cost, wait, &st)
		return st, t, denied, false
	case ref.Found():
		// Room for the key under rs first: a segment that cannot take it
		// leaves it in its old slot, with its debt, and the call is
		// refused as a full store's (never a full bucket next time).
		s.drainHot(key) // see carry
		pd, ok := s.m.Prepare(sg, key, h, rs)
		if !ok {
			return st, t, 0, true
		}
		ref = s.m.Find(sg, key, h) // Prepare may have rebuilt the table
		old := s.m.Retire(sg, ref)
		t = max(t, rs.Now()) // see carry
		rs.Carry(from, old[:from.Len()], t, st[:n])
		_, denied = rs.Reserve(st[:n], t, cost, wait)
		s.m.Commit(sg, pd, st[:n])
		return st, t, denied, false
	}
	if s.bg == nil || s.book.Full() { // with a background sweeper, only a full store samples
		s.removed(s.m.Sample(sg, s.routine(t), &s.floor, sampled))
	}
	t = s.floor.Start(rs, t, st[:n])
	if _, denied = rs.Reserve(st[:n], t, cost, wait); denied >= 0 { // only for a clock that went back past the floor
		return st, t, denied, false
	}
	if !s.book.Reserve() {
		return st, t, 0, true
	}
	if !s.m.Insert(sg, key, h, rs, st[:n]) {
		s.book.Release(1)
		return st, t, 0, true
	}
	return st, t, -1, false
}

// removed counts n keys evicted.
func (s *Store) removed(n int) {
	s.book.Release(n)
	s.book.Evicted(n)
}

// full is what a request for a new key does when the store is full and
// its segment's sample freed nothing: a whole sweep, if one is due
// (sweep.Pacer), else a bounded scan of the other segments (evictOne);
// then one more try, and refusal if that finds the store full again.
func (s *Store) full(key string, h uint64, rs *rules.Rules, cost int, wait time.Duration) (sweep.States, time.Duration, int, error) {
	if s.pacer.Charge(sweep.RefusalWeight) {
		s.Sweep()
		s.pacer.Swept()
	} else {
		s.evictOne(h)
	}
	st, at, denied, full := s.takeOnce(key, h, rs, cost, wait)
	if full {
		return st, at, 0, s.refuse()
	}
	return st, at, denied, nil
}

// errTableFull is the refusal of a new key by a segment whose table cannot
// take it (casmap.Map.Insert) in a store that is not full.
var errTableFull = fmt.Errorf("%w: the key's segment holds 2 GiB of keys or 65535 policies", keyrate.ErrStoreFull)

// refuse counts a refused request and returns its error: the cap's, or
// errTableFull if the store is not full.
func (s *Store) refuse() error {
	if err := s.book.Refuse(); s.book.Full() && err != nil {
		return err
	}
	return errTableFull
}

// refusalSegments is the most segments evictOne visits.
const refusalSegments = 1024

// evictOne is a refused insertion's bounded search for room: it visits the
// segments after h's in turn, one lock at a time, examining at most
// sweep.RefusalScan keys, evicts the full keys it examines, and stops after
// the first segment where it evicted any.
func (s *Store) evictOne(h uint64) {
	budget := sweep.RefusalScan
	segs := s.m.Segments()
	first := s.m.Index(h)
	for i := 1; i <= segs && i <= refusalSegments && budget > 0; i++ {
		sg := s.m.At((first + i) % segs)
		now := s.pols.Now()
		sg.Lock()
		n := min(budget, s.m.Len(sg))
		removed := 0
		if n > 0 {
			removed = s.m.Sample(sg, now, &s.floor, n)
		}
		sg.Unlock()
		s.removed(removed)
		if removed > 0 {
			return
		}
		budget -= n
	}
}

// Reserve reserves cost tokens of key for the earliest slot at most
// maxWait away: one compare-and-swap for a known key. See keyrate.WaitLimiter.
func (s *Store) Reserve(key string, cost int, maxWait time.Duration) (keyrate.Reservation, error) {
	s.drainHot(key)
	return sweep.Reserve(s.pols, (*front)(s), key, cost, maxWait)
}

// ReserveTier is Reserve under tier's policy. See keyrate.WaitLimiter.
func (s *Store) ReserveTier(key string, tier keyrate.Tier, cost int, maxWait time.Duration) (keyrate.Reservation, error) {
	s.drainHot(key)
	return sweep.ReserveTier(s.pols, (*front)(s), key, tier, cost, maxWait)
}

// Wait spends cost tokens of key, waiting for them on the store's clock
// if need be. See keyrate.WaitLimiter.
func (s *Store) Wait(ctx context.Context, key string, cost int) error {
	s.drainHot(key)
	return sweep.Wait(ctx, s.pols, (*front)(s), key, cost)
}

// WaitTier is Wait under tier's policy. See keyrate.WaitLimiter.
func (s *Store) WaitTier(ctx context.Context, key string, tier keyrate.Tier, cost int) error {
	s.drainHot(key)
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
	slot, of, _ := s.lookup(key)
	if of != rs {
		return 0, 0, false, false
	}
	r := rs.Rule(0)
	t = rs.Now()
	if rs.OneBucket() {
		state, ok = spend(r, slot, r.Ticks(t), cost, r.WaitTicks(wait))
	} else {
		state, ok = spendWindow(r, slot, r.Ticks(t), cost, r.WaitTicks(wait))
	}
	if state < casmap.Moved {
		return state, t, ok, true
	}
	return 0, 0, false, false
}

// ReserveRare is the slow path: a new key, or one under another policy
// or of several windows. See sweep.Reserver.
func (f *front) ReserveRare(key string, rs *rules.Rules, cost int, wait time.Duration) (keyrate.Reservation, error) {
	s := (*Store)(f)
	st, at, denied, err := s.take(key, s.m.Hash(key), rs, cost, max(wait, 0))
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
	return rules.CancelOnce(r, func(rs *rules.Rules) bool { return s.cancelClaimed(r, rs) })
}

// cancelClaimed is Cancel of r, made under rs, once it is claimed.
func (s *Store) cancelClaimed(r keyrate.Reservation, rs *rules.Rules) bool {
	key := r.Key()
	h := s.m.Hash(key)
	sg := s.m.Segment(h)
	end, slot, cost := rules.ReservationEnd(r), r.At(), r.Cost()
	for {
		ref := s.m.Find(sg, key, h)
		if ref.Rules() != rs {
			return false
		}
		ok, sentinel := cancel(ref, rs, end, slot, cost)
		switch sentinel {
		case 0:
			return ok
		case casmap.Moved:
			sg.Wait()
			continue // the same bucket, in the new table
		}
		return false // removed: the bucket changed
	}
}

// cancel gives back the cost tokens of a reservation under rs that left
// window 0 in state end, with its slot at reading slot, from ref, if the
// bucket allows it (rules.Rules.Cancel), reading the clock after loading
// the states; it returns whether it did, or the sentinel it found.
func cancel(ref casmap.Ref, rs *rules.Rules, end rules.State, slot time.Duration, cost int) (bool, rules.State) {
	var s sweep.States
	n := rs.Len()
	if n > 1 {
		v, sentinel := ref.Lock()
		if sentinel != 0 {
			return false, sentinel
		}
		ref.LoadStates(v, s[:n])
		ok := rs.Cancel(s[:n], end, rs.Now(), slot, cost)
		ref.Unlock(s[:n])
		return ok, 0
	}
	for {
		old := ref.Load()
		if old >= casmap.Moved {
			return false, old
		}
		s[0] = old
		// The clock is read after the load: no request decided before
		// it holds a later reading (see rules.Rule.Cancel).
		if !rs.Cancel(s[:1], end, rs.Now(), slot, cost) {
			return false, 0
		}
		if ref.CompareAndSwap(old, s[0]) {
			return true, 0
		}
	}
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
	h := s.m.Hash(key)
	sg := s.m.Segment(h)
	n := rs.Len()
	for {
		var st sweep.States
		ref := s.m.Find(sg, key, h)
		t := rs.Now()
		if !ref.Found() {
			t = s.floor.Start(rs, t, st[:n]) // a new, full bucket
			return rs.Peek(st[:n], t)
		}
		from := ref.Rules()
		if from == nil { // removed meanwhile
			continue
		}
		old, sentinel := states(ref, from)
		switch sentinel {
		case casmap.Moved:
			sg.Wait()
			continue
		case rules.Tombstone:
			continue
		}
		if from == rs {
			return rs.Peek(old[:n], t)
		}
		rs.Carry(from, old[:from.Len()], t, st[:n])
		return rs.Peek(st[:n], t)
	}
}

// states returns the states of ref, a slot under rs, or the sentinel it
// found.
func states(ref casmap.Ref, rs *rules.Rules) (s sweep.States, sentinel rules.State) {
	n := rs.Len()
	if n == 1 {
		v := ref.Load()
		if v >= casmap.Moved {
			return s, v
		}
		s[0] = v
		return s, 0
	}
	v, sentinel := ref.Lock()
	if sentinel != 0 {
		return s, sentinel
	}
	ref.LoadStates(v, s[:n])
	ref.Release(v)
	return s, 0
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
// keyrate.PolicyLimiter. A key under another policy is moved to tier's
// first; if its segment cannot take it (see Store), RefundTier gives
// nothing back and returns an error wrapping keyrate.ErrStoreFull.
func (s *Store) RefundTier(key string, tier keyrate.Tier, cost int) error {
	rs, err := s.pols.Rules(tier)
	if err != nil {
		return err
	}
	return s.refund(key, rs, cost)
}

// refund is Refund under rs: a key the store does not hold is full, and
// gains nothing; a key under another policy is carried over to rs first.
func (s *Store) refund(key string, rs *rules.Rules, cost int) error {
	if err := rs.CheckCost(cost); err != nil || rs.Unlimited() {
		return err
	}
	s.refunds.Begin() // before the shards' hold: Begin waits for undos, which hold nothing
	defer s.refunds.End()
	if s.hot != nil { // a hot key's batches back in its word first, and none taken till done
		if k := s.hot.find(key); k != nil {
			k.Hold()
			defer k.Release()
		}
	}
	h := s.m.Hash(key)
	sg := s.m.Segment(h)
	for {
		ref := s.m.Find(sg, key, h)
		if !ref.Found() {
			return nil
		}
		if ref.Rules() != rs {
			if !s.carry(sg, key, h, rs) {
				return errTableFull // nothing given back: the key keeps its debt
			}
			continue
		}
		switch refund(ref, rs, rs.Now(), cost) {
		case 0:
			return nil
		case casmap.Moved:
			sg.Wait()
		}
		// Removed or moved: look the key up again (a new slot may hold
		// spends since).
	}
}

// refund gives cost tokens back to every window of ref, a slot under rs,
// at reading t (rules.Rules.Refund), or returns the sentinel it found.
func refund(ref casmap.Ref, rs *rules.Rules, t time.Duration, cost int) rules.State {
	n := rs.Len()
	if n > 1 {
		v, sentinel := ref.Lock()
		if sentinel != 0 {
			return sentinel
		}
		var st sweep.States
		ref.LoadStates(v, st[:n])
		rs.Refund(st[:n], t, cost)
		ref.Unlock(st[:n])
		return 0
	}
	r := rs.Rule(0)
	now := r.Ticks(t)
	for {
		old := ref.Load()
		if old >= casmap.Moved {
			return old
		}
		if ref.CompareAndSwap(old, r.Refund(old, now, cost)) {
			return 0
		}
	}
}

// carry moves key, under another policy than rs, to rs, carrying its
// states over (rules.Rules.Carry) into a new slot, under its segment's
// lock. A key that is gone by then, or already under rs, is left alone.
// It reports false, leaving the key in its old slot with its states, if
// the segment cannot take the key under rs (casmap.Map.Prepare).
//
// A hot key's shards are given back into the old slot first (drainHot).
//
// The states are carried at a reading taken once the old slot is retired
// (and no earlier than the call's first, taken before the lock), so that
// no spend from it holds a later one: a carry at an older reading would
// count the debt of a spend made after it from that reading, and a key
// moved to a faster rate would repay it early (rules.Rules.Carry carries
// the debt at the reading it is given).
func (s *Store) carry(sg *casmap.Segment, key string, h uint64, rs *rules.Rules) bool {
	t := rs.Now()
	sg.Lock()
	defer sg.Unlock()
	ref := s.m.Find(sg, key, h)
	from := ref.Rules()
	if !ref.Found() || from == rs {
		return true
	}
	// A hot key's batches back in the slot they were charged to, before
	// Prepare may rebuild the table (moving the slot) and Retire ends it:
	// a give-back never writes a moved or retired slot, and they would be
	// lost (TestHotTierMovesFrozen). One taken meanwhile is.
	s.drainHot(key)
	pd, ok := s.m.Prepare(sg, key, h, rs)
	if !ok {
		return false
	}
	ref = s.m.Find(sg, key, h) // Prepare may have rebuilt the table
	var st sweep.States
	n := rs.Len()
	old := s.m.Retire(sg, ref)
	rs.Carry(from, old[:from.Len()], max(t, rs.Now()), st[:n])
	s.m.Commit(sg, pd, st[:n])
	return true
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
// instant, never above keyrate.WithMaxKeys's cap.
func (s *Store) Len() int { return s.book.Keys() }

// Sweep removes every key whose bucket is full now, segment by segment,
// and returns how many it removed. See keyrate.BoundedLimiter.
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
	for i := range s.m.Segments() {
		removed, kept := s.m.Sweep(s.m.At(i), now, &s.floor)
		s.removed(removed)
		n += removed
		left += kept
	}
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
