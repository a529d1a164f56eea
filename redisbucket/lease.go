package redisbucket

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/isnil"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/wrap"
)

// Lease configures WithLeases.
type Lease struct {
	// Size is the number of tokens a lease hands out, at least 1.
	Size int
	// Life is how long a lease's tokens may be handed out after Redis
	// granted them, from 1ms to a minute. A key is hot, and gets a
	// lease, when its previous request in this process came less than
	// Life before.
	Life time.Duration
	// Keys bounds how many keys the store tracks for leases, from 1 to
	// MaxDenyCacheKeys. The default (0) is 4096.
	Keys int
	// Clock times the leases. The default (nil) is the store's local
	// clock: the WithTimeSource clock, or clock.System().
	Clock clock.Clock
}

// WithLeases lets the store spend the tokens of a hot key in Redis in
// bulk and hand them out in process (opt-in): when a key's request comes
// less than l.Life after its previous one in this process, the store
// spends l.Size tokens in one call (if every window holds them) and
// answers the key's next requests from them, with no round trip, for up
// to l.Life; then it gives the unused ones back (a refund) and takes
// another lease if the key is still hot. A key whose lease Redis denies,
// and a cost above what the lease holds, go to Redis as without leases,
// as does every request under a policy with a window algorithm
// (keyrate.FixedWindow, SlidingWindow): a lease's tokens handed out after
// its window ended would count in none.
//
// Every token is spent in Redis before it is handed out, so the fleet
// never admits more than Redis granted; but a token handed out up to Life
// after Redis granted it lands beside the tokens the window refilled in
// that time, which other processes may have spent: over an interval of
// length T, up to Rate·Life/Per more than Burst + Rate·T/Per. So that the
// bound holds exactly, WithLeases lowers every window's Burst by that
// slack, g = ⌈Rate·Life/Per⌉ (for the default limit, every policy, and
// those SetPolicy sets later; Limit, Policies and each Decision report the
// lowered Burst, so a policy read from Policies and set again is lowered
// again): with a Burst of B − g the fleet's admissions, each at
// most Life late, stay within B + Rate·T/Per. Give every process of the
// fleet the same Lease, since each process's spends count against the
// others'. New returns an error wrapping keyrate.ErrInvalidLimit for a
// window whose Burst is not above g.
//
// The price is under-admission: a key's burst is g tokens smaller, and
// the tokens a lease holds and does not hand out are spent until it ends
// (a lease that ends with no further request keeps them; they refill as
// any spent token does): a fleet of N processes that keep a key hot
// admits at least B − g − N·Size + Rate·T/Per over an interval of length
// T. Leases pay off on keys far below their limit, hit by many requests
// per Life in each process; a key's lease is taken only when Size fits in
// every window's Burst.
//
// A request that arrives while another is taking the key's next lease
// (or giving back the last one's tokens) waits for it and is answered from
// it if it can be, within its own context and the store's timeout: one
// timeout bounds each request, its wait and its round trips together,
// however many requests on a hot key a hung server holds up.
//
// The Decision of a request a lease answers is allowed, with Remaining
// the lease's tokens left and no reset times: it is not Redis's.
// Stats.Leases and Stats.Leased count the leases taken and the requests
// they answered. New returns an error wrapping keyrate.ErrInvalidOption
// for a field of l out of range. The default is no leases.
func WithLeases(l Lease) keyrate.Option {
	return config.StoreOption("redisbucket.WithLeases", func(s *settings) error {
		switch {
		case l.Size < 1:
			return fmt.Errorf("lease Size %d is below 1", l.Size)
		case l.Life < time.Millisecond || l.Life > time.Minute:
			return fmt.Errorf("lease Life %v is not from 1ms to 1m", l.Life)
		case l.Keys < 0 || l.Keys > MaxDenyCacheKeys:
			return fmt.Errorf("lease Keys %d is not from 0 (the default) to %d", l.Keys, MaxDenyCacheKeys)
		case l.Clock != nil && isnil.Is(l.Clock):
			return fmt.Errorf("lease Clock is a nil %T", l.Clock)
		}
		if l.Keys == 0 {
			l.Keys = 4096
		}
		s.lease = &l
		return nil
	})
}

// leaseShards is the number of shards of the lease table.
const leaseShards = 64

// leases is WithLeases's table: the keys seen recently, each with its
// lease, in shards of bounded maps.
type leases struct {
	cfg    Lease
	clk    clock.Clock
	seed   maphash.Seed
	max    int // keys per shard
	shards [leaseShards]struct {
		mu sync.Mutex
		m  map[string]*lease
	}
}

// lease is one key's: the tokens left to hand out until end, under rs.
// Its mutex is never held across a round trip: a request that must talk
// to Redis for the lease (to give its tokens back, to take the next)
// marks it busy, with a channel it closes when done, and lets go of the
// mutex. The key's other requests wait on that channel, their own
// context and their own timeout, whichever ends first (see allow).
type lease struct {
	mu     sync.Mutex
	busy   chan struct{} // non-nil while a request takes or gives back the lease's tokens in Redis; closed when it is done
	rs     *rules.Rules
	fits   bool // Size fits in every window of rs
	tokens int
	end    time.Duration
	last   time.Duration // the reading of the key's previous request
}

func newLeases(l Lease, local clock.Clock) *leases {
	if l.Clock == nil {
		l.Clock = local
	}
	ls := &leases{cfg: l, clk: l.Clock, seed: maphash.MakeSeed(), max: max(l.Keys/leaseShards, 1)}
	for i := range ls.shards {
		ls.shards[i].m = make(map[string]*lease)
	}
	return ls
}

// entry returns key's lease, tracking it if the table has room; nil if
// not.
func (ls *leases) entry(key string, now time.Duration) *lease {
	sh := &ls.shards[maphash.String(ls.seed, key)%leaseShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if l := sh.m[key]; l != nil {
		return l
	}
	if len(sh.m) >= ls.max {
		for k, l := range sh.m { // drop the cold keys with nothing leased
			if l.mu.TryLock() {
				if l.tokens == 0 && l.busy == nil && now-l.last >= ls.cfg.Life {
					delete(sh.m, k)
				}
				l.mu.Unlock()
			}
		}
		if len(sh.m) >= ls.max {
			return nil
		}
	}
	l := &lease{last: now - ls.cfg.Life} // not hot until its next request
	sh.m[strings.Clone(key)] = l         // its own copy: key may share a far larger string's bytes
	return l
}

// allow answers a request of cost for key under rs from a lease, taking
// one if the key is hot, and reports whether it did; if not, the request
// goes to Redis as without leases, under the context allow returns (ctx,
// or the callCtx that bounds the call's round trips: one timeout for the
// whole call). A lease's round trip that fails is answered by the failure
// policy (and reported as answered, and as degraded).
//
// A request that finds another one taking or giving back the key's lease
// waits for it, once, so that the new lease's tokens serve it, but no
// longer than its own context and its own timeout allow, counted from the
// start of its wait and bounding its round trip after it too: a hung
// server costs each request at most one timeout, however many requests
// on the key queue up.
func (ls *leases) allow(ctx context.Context, s *Store, key string, rs *rules.Rules, cost int) (_ keyrate.Decision, ok bool, _ error, degraded bool, rt context.Context) {
	now := ls.clk.Now()
	l := ls.entry(key, now)
	if l == nil || cost > ls.cfg.Size {
		return keyrate.Decision{}, false, nil, false, ctx
	}
	l.mu.Lock()
	if busy := l.busy; busy != nil {
		l.mu.Unlock()
		call := newCallCtx(ctx, s.deadlines)
		if err := call.wait(busy); err != nil {
			return keyrate.Decision{}, true, fmt.Errorf("redisbucket: %w", err), false, call
		}
		l.mu.Lock()
		if l.busy != nil { // another request took the turn: go to Redis, with what is left of the timeout
			l.mu.Unlock()
			return keyrate.Decision{}, false, nil, false, call
		}
		rt = call
	}
	now = ls.clk.Now() // read under the lock: no earlier than the last request's
	hot := now-l.last < ls.cfg.Life && now >= l.last
	l.last = now
	if l.rs == rs && l.tokens >= cost && now < l.end && now >= l.end-ls.cfg.Life {
		l.tokens -= cost
		left := l.tokens
		l.mu.Unlock()
		s.leased.Add(1)
		return keyrate.Decision{Allowed: true, Policy: rs.Name(), Limit: first(rs), Remaining: left}, true, nil, false, ctx
	}
	// The lease is spent, over, or of another policy: its tokens go back,
	// and the next is taken if the key is hot, with the mutex let go.
	back, backRS := l.tokens, l.rs
	l.tokens, l.end = 0, 0
	if l.rs != rs {
		l.rs = rs
		l.fits = rs.CheckCost(ls.cfg.Size) == nil
	}
	take := hot && l.fits
	if rt == nil {
		rt = ctx
	}
	if back == 0 && !take {
		l.mu.Unlock()
		return keyrate.Decision{}, false, nil, false, rt
	}
	busy := make(chan struct{})
	l.busy = busy
	l.mu.Unlock()
	granted := 0
	defer func() { // also if the client panics: the lease must not stay busy for good
		l.mu.Lock()
		l.busy = nil
		if granted > 0 {
			l.tokens, l.end = granted, now+ls.cfg.Life
		}
		l.mu.Unlock()
		close(busy)
	}()
	if _, ok := rt.(*callCtx); !ok {
		rt = newCallCtx(ctx, s.deadlines)
	}
	if back > 0 && backRS != nil {
		var st [keyrate.MaxLimits]rules.State
		_, _, _ = s.eval(rt, key, backRS, -back, st[:backRS.Len()]) // lost if Redis does not answer: that only admits less
	}
	if !take {
		return keyrate.Decision{}, false, nil, false, rt
	}
	var st [keyrate.MaxLimits]rules.State
	denied, _, err := s.eval(rt, key, rs, ls.cfg.Size, st[:rs.Len()])
	if err != nil {
		d, err, degraded := s.failed(ctx, key, rs, cost, err)
		return d, true, err, degraded, rt
	}
	if denied >= 0 {
		return keyrate.Decision{}, false, nil, false, rt // too few tokens for a lease: ask for cost alone
	}
	s.leasesTaken.Add(1)
	s.leased.Add(1)
	granted = ls.cfg.Size - cost
	return keyrate.Decision{Allowed: true, Policy: rs.Name(), Limit: first(rs), Remaining: granted}, true, nil, false, rt
}

// slack returns g = ⌈Rate·life/Per⌉ for l: the tokens a window refills in
// a lease's life.
func slack(l keyrate.Limit, life time.Duration) (uint64, bool) {
	hi, lo := bits.Mul64(uint64(l.Rate), uint64(life))
	if hi >= uint64(l.Per) {
		return 0, false
	}
	q, r := bits.Div64(hi, lo, uint64(l.Per))
	if r != 0 {
		q++
	}
	return q, true
}

// leaseLimit returns l with its Burst lowered by the slack of leases of
// the given life (see WithLeases), or an error wrapping
// keyrate.ErrInvalidLimit if that leaves no Burst; l unchanged if it is
// invalid or not a token bucket, for compileUnits to say why.
func leaseLimit(l keyrate.Limit, life time.Duration) (keyrate.Limit, error) {
	if l.Validate() != nil || l.Algorithm != keyrate.TokenBucket {
		return l, nil
	}
	g, ok := slack(l, life)
	if !ok || g >= uint64(l.Burst) {
		return l, fmt.Errorf("%w: Burst %d at %d per %v: leases of life %v need a Burst above the %d tokens it refills in that time (redisbucket.WithLeases)",
			keyrate.ErrInvalidLimit, l.Burst, l.Rate, l.Per, life, g)
	}
	l.Burst -= int(g)
	return l, nil
}

// leasePolicy returns p with every window's Burst lowered as leaseLimit
// does, or an error wrapping keyrate.ErrInvalidPolicy.
func leasePolicy(p keyrate.Policy, life time.Duration) (keyrate.Policy, error) {
	p.Limits = slices.Clone(p.Limits)
	for i, l := range p.Limits {
		var err error
		if p.Limits[i], err = leaseLimit(l, life); err != nil {
			return p, wrap.Errorf("%w: %q window %d: %w", keyrate.ErrInvalidPolicy, p.Name, i, err)
		}
	}
	return p, nil
}
