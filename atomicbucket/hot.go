package atomicbucket

import (
	"encoding/binary"
	"sync"
	"time"
	"unsafe"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/casmap"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/hotshard"
	"github.com/keyrate/keyrate/internal/rules"
)

// settings is the store's own settings, set by its options.
type settings struct {
	hot []string // WithHotKeys
	// Test knobs (export_test.go): every key hot, the shard count and the
	// batches' lifetime (0 for the defaults).
	allHot   bool
	shards   int
	lifetime time.Duration
}

// WithHotKeys marks keys as hot: Allow, AllowN and AllowTier on such a key
// serve it from per-CPU shards of its tokens, each a batch taken from the
// key's word, so that calls on it do not all compare-and-swap one word. A
// hot key never admits more than its limit, and with the clock stopped it
// admits exactly Burst, as any key does. It may admit less over time: each
// batch is charged its lifetime (a millisecond) as well as its tokens, so
// busy shards run the key's word down, and batches are taken only while
// the word keeps half its burst; past that, calls spend from the word
// directly, at the plain key's speed. A burst after a spell of sharded
// load so finds about half the key's burst, and a key over its limit
// loses about half a burst once (docs/design/hotkeys.md has the bounds). A time source that steps back can let a give-back return up to
// a batch's worth too much (the exception docs/guides/contract.md lists;
// the default clock never steps back).
//
// Sharding applies to a hot key under a one-window TokenBucket policy
// whose rate refills at least one token a millisecond and whose burst is
// at least 4 per shard (2·GOMAXPROCS shards, rounded up to a power of
// two); under any other policy a hot key is served as any other. A
// decision served from a shard reports the key's word: Remaining counts
// the tokens outside the shards (a lower bound), and a denial comes only
// after the shards were given back, so its RetryAfter is the plain
// store's. Reserve, ReserveTier, Wait and WaitTier give a hot key's shards
// back first, then work as for any key, and so does keyrate.AllowAll
// for the hot keys of its request (decided in turn); Refund and RefundTier give them
// back and take no batch until the word is refilled, so that a refund
// fills the key to its Burst and no further; Peek and Cancel work on the
// word alone (Peek's Remaining is then a lower bound too).
//
// The default is none. Every call on a store with hot keys first looks
// the key up among them (a few string comparisons, or a map lookup for
// more than 4 hot keys), and New makes each hot key's shards, a cache
// line each (1 KiB a key at GOMAXPROCS 8), whether or not it is ever
// used. Given to another store, WithHotKeys makes its New fail with
// keyrate.ErrInvalidOption.
func WithHotKeys(keys ...string) keyrate.Option {
	return config.StoreOption("atomicbucket.WithHotKeys", func(s *settings) error {
		s.hot = append(s.hot, keys...)
		return nil
	})
}

// hotSet is the store's hot keys and their shards.
type hotSet struct {
	names []hotName // up to hotScan keys, compared in turn
	keys  []*hotshard.Key
	m     map[string]*hotshard.Key // more than hotScan keys
	// all makes every key hot, its shards made on first use (a test
	// knob: see settings).
	all      bool
	lazy     sync.Map // key → *hotshard.Key, when all
	shards   int
	lifetime time.Duration
	// homes is every named key's shards with its segment, for
	// beforeRebuild (set by home).
	homes []hotHome
}

// hotHome is a named hot key's shards and the segment of its slot.
type hotHome struct {
	sg *casmap.Segment
	k  *hotshard.Key
}

// home records the segment of m each named hot key lives in, and makes
// every rebuild of such a segment give the key's shards back first
// (beforeRebuild). Call it once, after m's Init.
func (h *hotSet) home(m *casmap.Map) {
	add := func(name string, k *hotshard.Key) {
		h.homes = append(h.homes, hotHome{sg: m.Segment(m.Hash(name)), k: k})
	}
	for i := range h.names {
		add(h.names[i].name, h.keys[i])
	}
	for name, k := range h.m {
		add(name, k)
	}
	m.OnRebuild(h.beforeRebuild)
}

// beforeRebuild gives back the shards of the named hot keys of segment
// sg, whose table is about to be rebuilt under its lock: the rebuild
// moves each key to a new slot, and a batch charged to the old one could
// give nothing back (a give-back never writes a moved slot), so that a
// rebuild would lose what the shards hold (TestHotRebuildFrozen). A batch
// taken meanwhile, before the rebuild freezes the slot, still is lost, as
// are those of the keys WithAllHot (a test knob) makes hot.
func (h *hotSet) beforeRebuild(sg *casmap.Segment) {
	for i := range h.homes {
		if h.homes[i].sg == sg {
			h.homes[i].k.Drain()
		}
	}
}

// hotScan is the most hot keys looked up by comparison rather than a map.
const hotScan = 4

// hotName is a hot key, with its first and last 8 bytes if it has 8 to 16
// (casmap.Short), so that such a key is matched by two word compares.
type hotName struct {
	name   string
	lo, hi uint64
}

// match reports whether key is h's name.
func (h *hotName) match(key string) bool {
	if len(key) != len(h.name) {
		return false
	}
	if casmap.Short(key) {
		return load64(key, 0) == h.lo && load64(key, len(key)-8) == h.hi
	}
	return key == h.name
}

// load64 returns the 8 bytes of s from i, little-endian; s must hold them.
func load64(s string, i int) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(s)), i))[:])
}

// newHotSet returns the set of names, or nil if there are none.
func newHotSet(own settings) *hotSet {
	names := own.hot
	if len(names) == 0 && !own.allHot {
		return nil
	}
	n := own.shards
	if n <= 0 {
		n = hotshard.Shards()
	}
	h := &hotSet{all: own.allHot, shards: n, lifetime: own.lifetime}
	seen := make(map[string]*hotshard.Key, len(names))
	for _, name := range names {
		if seen[name] == nil {
			k := hotshard.NewKey(n, own.lifetime)
			seen[name] = k
			hn := hotName{name: name}
			if casmap.Short(name) {
				hn.lo, hn.hi = load64(name, 0), load64(name, len(name)-8)
			}
			h.names = append(h.names, hn)
			h.keys = append(h.keys, k)
		}
	}
	if len(h.names) > hotScan {
		h.m, h.names, h.keys = seen, nil, nil
	}
	return h
}

// find returns key's shards, or nil if key is not hot.
func (h *hotSet) find(key string) *hotshard.Key {
	if h.all {
		if k, ok := h.lazy.Load(key); ok {
			return k.(*hotshard.Key)
		}
		k, _ := h.lazy.LoadOrStore(key, hotshard.NewKey(h.shards, h.lifetime))
		return k.(*hotshard.Key)
	}
	if h.m != nil {
		return h.m[key]
	}
	for i := range h.names {
		if h.names[i].match(key) {
			return h.keys[i]
		}
	}
	return nil
}

// allowHot is Allow of cost on a hot key under rs: served from a shard, or
// from the key's word (hotshard.Key.Take). done is false, and nothing was
// done, when the call is for the plain path: a key that is not hot, a
// policy that is not one token bucket or under which the key gets no
// batches (hotshard.Key.Sharded), a key the store does not hold
// under rs, or a slot that moved or died meanwhile.
func (s *Store) allowHot(key string, rs *rules.Rules, cost int) (ok, done bool) {
	k := s.hot.find(key)
	if k == nil || !rs.OneBucket() {
		return false, false
	}
	if b, _ := k.Sharded(rs); b == 0 {
		return false, false
	}
	now := rs.Rule(0).Now()
	i, ok := k.Serve(rs, now, cost)
	if ok {
		return true, true
	}
	slot, of, _ := s.lookup(key)
	if of != rs {
		return false, false
	}
	st, ok := k.Take(rs, slot, now, cost, i)
	return ok, st < casmap.Moved
}

// drainHot gives back what the shards of key, if it is hot, hold, so that
// a reservation or a wait that follows finds every token the key has
// (up to batches taken meanwhile).
func (s *Store) drainHot(key string) {
	if s.hot != nil {
		if k := s.hot.find(key); k != nil {
			k.Drain()
		}
	}
}

// decideHot is allowHot for AllowN and AllowTier: it returns the decision,
// built from the key's word (see WithHotKeys).
func (s *Store) decideHot(key string, rs *rules.Rules, cost int) (d keyrate.Decision, done bool) {
	k := s.hot.find(key)
	if k == nil || !rs.OneBucket() {
		return d, false
	}
	if b, _ := k.Sharded(rs); b == 0 {
		return d, false
	}
	r := rs.Rule(0)
	now := r.Now()
	i, served := k.Serve(rs, now, cost)
	slot, of, _ := s.lookup(key)
	if served {
		if of == rs {
			if st := slot.Load(); st < casmap.Moved {
				return r.Decide(st, now, cost, true), true
			}
		}
		// Served, but the word is not there to read: none left outside
		// the shards, as far as this call knows.
		return r.Decide(r.Encode(0, now), now, cost, true), true
	}
	if of != rs {
		return d, false
	}
	st, ok := k.Take(rs, slot, now, cost, i)
	if st >= casmap.Moved {
		return d, false
	}
	return r.Decide(st, now, cost, ok), true
}
