// Package hotshard spreads a hot key's tokens over shards, so that calls on
// one key do not all compare-and-swap one word. A shard takes a batch of
// tokens from the key's shared state (its GCRA word in a store) before it
// serves them, serves them with one compare-and-swap on its own cache
// line, and gives back what it did not use. The key never admits more than
// its limit: a batch is charged its tokens plus a cover of Δ ticks, its
// lifetime, after which it serves nothing; docs/design/hotkeys.md has the
// proof, the under-admission bound and what a decision means for such a
// key.
//
// The package owns the shards; the store owns the key's word, a
// *casmap.Slot, and tells Take which slot the key is in.
package hotshard

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/casmap"
	"github.com/keyrate/keyrate/internal/layout"
	"github.com/keyrate/keyrate/internal/rules"
)

// A shard's word packs its batch's state:
//
//	bits 0..31   count: tokens left to serve
//	bit  32      live: the batch's charge has not been given back
//	bit  33      claimed: a goroutine is filling the shard
//	bits 34..63  generation, advanced by every claim and drain
//
// A server swaps count down; a claim or a drain swaps the whole word to a
// new generation, so a server that read the batch's fields (end, rules)
// for an older word fails its swap.
const (
	countMask = 1<<32 - 1
	liveBit   = 1 << 32
	claimBit  = 1 << 33
	genOne    = 1 << 34
	genMask   = ^uint64(genOne - 1)
	maxBatch  = countMask
)

// Lifetime is the target lifetime Δ of a batch: 1ms. A key's batch holds
// what its rate refills in Δ (Params).
const Lifetime = time.Millisecond

// shard is one shard: its word and its batch's fields, written by the
// goroutine that claimed it before it publishes the word. Padded to a
// cache line so that shards never share one.
type shard struct {
	word atomic.Uint64
	t0   atomic.Uint64 // the batch's tick of take
	end  atomic.Uint64 // t0 + Δ: the batch serves at readings before it
	rs   atomic.Pointer[rules.Rules]
	slot atomic.Pointer[casmap.Slot]
	_    [layout.CacheLine - 40]byte // no false sharing between shards
}

// Key is one hot key's shards. Create it with NewKey; it is safe for
// concurrent use.
type Key struct {
	shards   []shard
	mask     uint32
	lifetime time.Duration
	fixed    int // a batch size that overrides Params' (tests)
	params   atomic.Pointer[params]
}

// params is Params under one policy, cached: a policy changes rarely.
type params struct {
	rs    *rules.Rules
	b     int
	cover uint64
}

// Sharded returns the batch size and cover of k's batches under rs, a
// one-window token-bucket policy (Params), from a cache of the latest
// policy asked about. A batch size of 0 means the key is not sharded under
// rs: serve it as any other key.
func (k *Key) Sharded(rs *rules.Rules) (b int, cover uint64) {
	if p := k.params.Load(); p != nil && p.rs == rs {
		return p.b, p.cover
	}
	b, cover = k.Params(rs.Rule(0))
	k.params.Store(&params{rs: rs, b: b, cover: cover})
	return b, cover
}

// Shards returns the shard count for the current GOMAXPROCS: the power of
// two at least 2·GOMAXPROCS.
func Shards() int { return layout.NextPow2(2 * runtime.GOMAXPROCS(0)) }

// MaxShards is the most shards a key has: Shards at the runtime's most
// GOMAXPROCS is 2048.
const MaxShards = 1 << 16

// NewKey returns a key with n shards (rounded up to a power of two, at
// least 1 and at most MaxShards) whose batches live for lifetime
// (Lifetime if it is not positive).
func NewKey(n int, lifetime time.Duration) *Key {
	n = layout.NextPow2(min(max(n, 1), MaxShards))
	if lifetime <= 0 {
		lifetime = Lifetime
	}
	return &Key{shards: make([]shard, n), mask: uint32(n - 1), lifetime: lifetime}
}

// Params returns the batch size b and the cover Δ, in ticks, of k's
// batches under the token-bucket rule r, with n the shard count: b is what
// the rate refills in the lifetime, at most Burst/(4n) (so that the shards
// together hold at most a quarter of the burst), and Δ is the lifetime, or
// b·I if that is shorter (so that the cover is never more than b tokens).
// b is 0, and the key served without shards, when that is below 1: a slow
// key, whose rate refills less than a token in the lifetime, or a burst
// under 4n, cannot hoard its burst in a shard.
func (k *Key) Params(r *rules.Rule) (b int, cover uint64) {
	n := len(k.shards)
	if r.Algorithm() != keyrate.TokenBucket {
		return 0, 0
	}
	lifetime := min(uint64(k.lifetime), uint64(r.Range())) * r.Scale()
	in := r.Interval()
	b = min(int(min(lifetime/in, maxBatch)), r.Limit().Burst/(4*n))
	if k.fixed > 0 {
		b = k.fixed
	}
	if b < 1 {
		return 0, 0
	}
	return b, min(lifetime, uint64(b)*in)
}

// Serve spends cost tokens under rs at tick now from the batch of the
// calling goroutine's shard, if that batch was taken under rs at or before
// now, has not expired and holds them: one compare-and-swap on the shard's
// own cache line. (A reading older than the batch's take, a goroutine's
// stale reading, does not serve from it: in the bound's terms the token
// would be admitted at a reading before the word was charged for it.) It reports whether it did, and the shard it picked, for Take.
func (k *Key) Serve(rs *rules.Rules, now uint64, cost int) (uint32, bool) {
	i := hint() & k.mask
	return i, k.serveAt(i, rs, now, cost)
}

// hint returns a shard hint for the calling goroutine: a hash of an
// address on its stack. A goroutine keeps its hint while its stack stays
// put, so that its calls find their shard's line in their core's cache,
// which a random shard per call would not (each call would fetch a line
// another core wrote last, as a single shared word makes them do); two
// goroutines share a shard only when their stacks hash alike. (No
// go:linkname to the runtime's processor id: see STYLE.md.)
func hint() uint32 {
	var x byte
	a := uint64(uintptr(unsafe.Pointer(&x))) >> 10
	return uint32((a * 0x9e3779b97f4a7c15) >> 40)
}

// serveAt is Serve from shard i.
func (k *Key) serveAt(i uint32, rs *rules.Rules, now uint64, cost int) bool {
	sh := &k.shards[i]
	for {
		w := sh.word.Load()
		if w&countMask < uint64(cost) {
			return false
		}
		if sh.rs.Load() != rs || now >= sh.end.Load() || now < sh.t0.Load() {
			return false // another policy's batch, expired, or taken after this call's reading
		}
		if sh.word.CompareAndSwap(w, w-uint64(cost)) {
			return true
		}
	}
}

// Take is a call that Serve could not serve from shard i: the key is in
// slot under rs, a one-window token-bucket policy, and the call wants cost
// tokens at tick now. If the shared state holds a batch comfortably (b + Δ,
// and half the burst besides), it refills shard i and serves the call from
// the new batch; otherwise it spends cost from the shared state directly.
// (The half burst kept is what a burst after a spell of sharded load still
// finds: covers are charged per shard, and while k shards hold batches the
// word loses k ticks a tick to them; see docs/design/hotkeys.md.) Before it
// denies, it drains every shard, giving back what their batches did not
// use, and tries again, until a pass finds every shard empty, then tries
// the word a last time. It returns
// the shared state after the call and whether it allowed it, or the
// sentinel (at or above casmap.Moved) it found in slot, having done
// nothing.
func (k *Key) Take(rs *rules.Rules, slot *casmap.Slot, now uint64, cost int, i uint32) (rules.State, bool) {
	r := rs.Rule(0)
	b, cover := k.Sharded(rs)
	for pass := 0; ; pass++ {
		if b >= cost {
			if st, ok, done := k.refill(rs, r, slot, now, cost, i&k.mask, b, cover); done {
				return st, ok
			}
		}
		st, ok := spend(r, slot, now, cost)
		if ok || st >= casmap.Moved {
			return st, ok
		}
		if testHookDenied != nil {
			testHookDenied()
		}
		if !k.Drain() {
			// Every shard was empty when the pass looked at it, but a
			// give-back that ended before then may have put its tokens in
			// the word after the spend above read it (a shard stays
			// claimed only until its tokens are back): read the word once
			// more. Any batch the pass found was given back before it
			// looked, so this read sees every token the shards held.
			return spend(r, slot, now, cost)
		}
		if testHookRetry != nil {
			testHookRetry()
		}
		if pass > 2 {
			runtime.Gosched() // a claim in flight: let it finish
		}
	}
}

// testHookRetry, if set (by tests), runs when Take's drain found a shard
// live or claimed and the call is about to try the word again.
var testHookRetry func()

// testHookDenied, if set (by tests), runs when Take's spend from the word
// was denied, before its drain.
var testHookDenied func()

// spend spends cost tokens from slot at tick now, the store's loop.
func spend(r *rules.Rule, slot *casmap.Slot, now uint64, cost int) (rules.State, bool) {
	for {
		old := slot.Load()
		if old >= casmap.Moved {
			return old, false
		}
		next, ok := r.ReserveBucket(old, now, cost, 0)
		if !ok || slot.CompareAndSwap(old, next) {
			return next, ok
		}
	}
}

// refill claims shard i if its batch cannot serve cost under rs, gives its
// old batch back, and takes a new one of b tokens and cover ticks from
// slot if the shared state then still holds that and half its burst,
// serving cost from it. done reports that the call was decided (st and ok
// its result, or st a sentinel).
func (k *Key) refill(rs *rules.Rules, r *rules.Rule, slot *casmap.Slot, now uint64, cost int, i uint32, b int, cover uint64) (st rules.State, ok, done bool) {
	sh := &k.shards[i]
	w := sh.word.Load()
	if w&claimBit != 0 {
		return 0, false, false
	}
	keep := max(uint64(b)*r.Interval()+cover, r.FillTicks()/2) // see Take
	if _, ok := r.TakeBatch(slot.Load(), now, b, cover, keep); !ok {
		return 0, false, false // not comfortable: spend directly, claiming nothing
	}
	gen := (w & genMask) + genOne
	if !sh.word.CompareAndSwap(w, gen|claimBit) {
		return 0, false, false
	}
	if w&liveBit != 0 {
		sh.giveBack(w & countMask)
	}
	for {
		old := slot.Load()
		if old >= casmap.Moved {
			sh.word.Store(gen)
			return old, false, true
		}
		next, ok := r.TakeBatch(old, now, b, cover, keep)
		if !ok {
			sh.word.Store(gen) // empty: the call spends directly
			return 0, false, false
		}
		if slot.CompareAndSwap(old, next) {
			st = next
			break
		}
	}
	sh.t0.Store(now)
	sh.end.Store(now + cover)
	sh.rs.Store(rs)
	sh.slot.Store(slot)
	sh.word.Store(gen | liveBit | uint64(b-cost))
	return st, true, true
}

// Drain empties every shard, giving back what each live batch did not use
// (see giveBack), and reports whether it found any shard live or claimed:
// false means a pass found every shard empty. A shard stays claimed while
// its batch is given back, so that a concurrent Drain that finds it
// reports it, and its caller tries the shared state again instead of
// denying before the tokens are back.
func (k *Key) Drain() bool {
	found := false
	for i := range k.shards {
		sh := &k.shards[i]
		for {
			w := sh.word.Load()
			if w&claimBit != 0 {
				found = true
				break
			}
			if w&liveBit == 0 {
				break
			}
			gen := (w & genMask) + genOne
			if sh.word.CompareAndSwap(w, gen|claimBit) {
				found = true
				sh.giveBack(w & countMask)
				sh.word.Store(gen)
				break
			}
		}
	}
	return found
}

// Hold drains every shard as Drain does, but keeps each one claimed
// until Release, so that no batch is taken from the key's word while the
// caller changes it: a refund, which fills the word up to Burst, would
// otherwise count a batch still in a shard as tokens the key lacks, and
// the key would hold that batch on top of a full word. It claims the
// shards in order, waiting out a claim in flight (a refill's or a drain's
// is short; another Hold's ends at its Release), so two Holds never wait
// on each other. Calls meanwhile are served from the word directly.
func (k *Key) Hold() {
	for i := range k.shards {
		sh := &k.shards[i]
		for {
			w := sh.word.Load()
			if w&claimBit != 0 {
				runtime.Gosched()
				continue
			}
			if sh.word.CompareAndSwap(w, (w&genMask)+genOne|claimBit) {
				if w&liveBit != 0 {
					sh.giveBack(w & countMask)
				}
				break
			}
		}
	}
}

// Release lets go of the shards Hold claimed, empty.
func (k *Key) Release() {
	for i := range k.shards {
		sh := &k.shards[i]
		sh.word.Store(sh.word.Load() & genMask)
	}
}

// giveBack gives back to the batch's slot the u tokens it did not serve
// and its cover still to come, end − t, at a reading t taken after loading
// the slot, if t is within the batch's lifetime: a batch taken at t0,
// charged b·I + Δ, is then charged as if it had been taken for t − t0 and
// (b − u) tokens, which covers every token it served (all at readings
// before t). An expired batch, or one given back at a reading before its
// take (a clock stepped back), gives back nothing, and so does a word
// that owes more than its Burst at t (a reservation pending:
// rules.Rule.GiveBack). The caller has swapped
// the shard's word away from the batch, so nothing serves from it any
// more.
func (sh *shard) giveBack(u uint64) {
	rs, slot := sh.rs.Load(), sh.slot.Load()
	if rs == nil || slot == nil {
		return
	}
	r := rs.Rule(0)
	t0, end := sh.t0.Load(), sh.end.Load()
	for {
		old := slot.Load()
		if old >= casmap.Moved { // moved or removed: the slot's history is gone
			return
		}
		t := r.Now() // after the load: no spend in old holds a later reading
		if t < t0 || t >= end {
			return
		}
		back := u*r.Interval() + (end - t)
		if slot.CompareAndSwap(old, r.GiveBack(old, back, t)) {
			return
		}
	}
}
