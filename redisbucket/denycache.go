package redisbucket

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"strings"
	"sync/atomic"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/rules"
)

// MaxDenyCacheKeys is the most keys WithDenyCache accepts.
const MaxDenyCacheKeys = 1 << 20

// WithDenyCache makes the store remember, for about keys keys, the state
// Redis answered for a key whose request it denied, or whose bucket an
// allowed request left without a token to spare, and answer the key's next
// requests from that state, in process, with no round trip, for as long as
// the state says they are denied: until the moment Redis said the cost
// would be there. Under a flood of requests on denied keys Redis then sees
// about one call per key per retry interval, and a denied request costs
// well under a microsecond and allocates nothing (see BenchmarkRedis,
// op=deny-cached).
//
// A request of a larger cost that comes after the moment a cost of 1
// would be there goes to Redis.
//
// The cache only ever denies, so it never admits more than Redis would.
// It denies at most one round trip's time longer than Redis would: it
// reads a key's state as of the moment the reply arrived (on the store's
// local clock), while the server computed it a little earlier, when the
// script ran. (Under WithTimeSource, whose reading the script itself uses,
// it denies exactly what Redis would.) A state that got better since, by a
// refund or a change of policy in another process, or by Redis losing the
// key, is not seen until the cached state would allow the request: another
// process's Refund gives its tokens back to this one's requests only then.
// This store's own Refund, RefundTier, Cancel and SetPolicy, and any call
// it sends to Redis for the key under another policy, drop or replace the
// key's entry, so they take effect at once.
//
// The cache is a fixed table of 8-way buckets, 4 to 8 pointers (32 to 64
// bytes) per key of capacity, allocated by New; an entry (about 150 bytes)
// exists only while a key is cached. A key it has no room for is answered
// by Redis, as without the cache: a full bucket keeps its entries until
// they expire, so that a flood on more keys than it holds does not evict
// them in turn. keys is from 1 to MaxDenyCacheKeys. The default is no cache:
// every request is a round trip.
func WithDenyCache(keys int) keyrate.Option {
	return config.StoreOption("redisbucket.WithDenyCache", func(s *settings) error {
		if keys < 1 || keys > MaxDenyCacheKeys {
			return fmt.Errorf("deny cache of %d keys is not from 1 to %d", keys, MaxDenyCacheKeys)
		}
		s.denyCache = keys
		return nil
	})
}

// denyWays is the number of entries in one bucket of the deny cache: one
// 64-byte cache line of pointers.
const denyWays = 8

// denyCache is WithDenyCache's table: buckets of denyWays entries, a key
// in the bucket its hash picks. Entries are immutable once published, so
// a lookup is a hash, up to denyWays atomic loads and a pure transition
// on a copy of the entry's states, with no lock and no allocation.
type denyCache struct {
	seed    maphash.Seed
	mask    uint64 // buckets − 1
	buckets []denyBucket
}

type denyBucket [denyWays]atomic.Pointer[denyEntry]

// denyEntry is a key's states as Redis answered them: under rs, at the
// local reading base, as rs reads them at reading off (see Store.eval).
type denyEntry struct {
	key   string
	rs    *rules.Rules
	base  time.Duration
	off   time.Duration
	until time.Duration // the reading at which a cost of 1 is allowed
	n     int
	st    [keyrate.MaxLimits]rules.State
}

func newDenyCache(keys int) *denyCache {
	n := uint64(1) << bits.Len64(uint64(max(keys/2, 1))-1) // a power of two ≥ keys/2
	return &denyCache{seed: maphash.MakeSeed(), mask: n - 1, buckets: make([]denyBucket, n)}
}

func (c *denyCache) bucket(key string) *denyBucket {
	return &c.buckets[maphash.String(c.seed, key)&c.mask]
}

// deny returns the Decision for a request of cost for key under rs at the
// local reading now, and true, if the key's cached state denies it; false
// if there is no such state or it allows the request, which then goes to
// Redis.
func (c *denyCache) deny(key string, rs *rules.Rules, cost int, now time.Duration) (keyrate.Decision, bool) {
	b := c.bucket(key)
	for i := range b {
		e := b[i].Load()
		if e == nil || e.rs != rs || e.key != key {
			continue
		}
		if now < e.base {
			// The clock went back (a time source): the state at base is
			// not the state at now, which only Redis can tell.
			return keyrate.Decision{}, false
		}
		if now >= e.until {
			// A cost of 1 is allowed by now; a larger one may not be,
			// but Redis says so.
			return keyrate.Decision{}, false
		}
		st := e.st // a copy: Take must not touch the published entry
		t := e.off + (now - e.base)
		denied := rs.Take(st[:e.n], t, cost)
		if denied < 0 {
			return keyrate.Decision{}, false
		}
		return rs.Decide(st[:e.n], t, cost, denied), true
	}
	return keyrate.Decision{}, false
}

// put caches st, the states of key under rs that Redis answered, as rs
// reads them at reading off, at the local reading base: in the key's
// entry if it has one, else in a free or expired slot of its bucket, else
// nowhere. A bucket full of entries that still deny keeps them: evicting
// one for the newcomer would send the evicted key's next request to Redis,
// whose answer would evict another, so a flood on one key more than a
// bucket holds would cost a call per round for two keys or more rather
// than for the one left out.
func (c *denyCache) put(key string, rs *rules.Rules, st []rules.State, off, base time.Duration) {
	b := c.bucket(key)
	slot := -1
	for i := range b {
		old := b[i].Load()
		switch {
		case old != nil && old.key == key:
			e := newDenyEntry(old.key, rs, st, off, base) // the cache's own copy of key, made when it came in
			b[i].Store(e)
			c.dropFrom(b, key, i+1) // a racing put may have left another
			return
		case slot < 0 && (old == nil || old.until <= base):
			slot = i
		}
	}
	if slot >= 0 {
		b[slot].Store(newDenyEntry(strings.Clone(key), rs, st, off, base)) // its own copy: key may share a far larger string's bytes
	}
}

// newDenyEntry returns put's entry for key.
func newDenyEntry(key string, rs *rules.Rules, st []rules.State, off, base time.Duration) *denyEntry {
	e := &denyEntry{key: key, rs: rs, base: base, off: off, n: len(st)}
	copy(e.st[:], st)
	e.until = base + (rs.SlotFor(st, off, 1) - off)
	return e
}

// drop removes key's entries, if any.
func (c *denyCache) drop(key string) {
	c.dropFrom(c.bucket(key), key, 0)
}

func (c *denyCache) dropFrom(b *denyBucket, key string, from int) {
	for i := from; i < len(b); i++ {
		if old := b[i].Load(); old != nil && old.key == key {
			b[i].CompareAndSwap(old, nil)
		}
	}
}
