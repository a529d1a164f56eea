package casmap

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/keyrate/keyrate/internal/rules"
)

// diffColliding returns n keys of each length in lens whose hashes
// under c's Map share the tag and the home slot of an 8-slot table (and,
// with one segment, the segment): keys the probe can tell apart only by
// their bytes (or, hashed, their whole hash). Of 8-to-16-byte keys it
// also picks pairs that share their first or last 8 bytes, the two words
// Lookup compares.
func diffColliding(c *checker, n int, lens []int) []string {
	var out []string
	for _, l := range lens {
		groups := map[uint64][]string{}
		rng := rand.New(rand.NewPCG(uint64(l), 5))
		for i := 0; i < 1<<20; i++ {
			b := make([]byte, l)
			for j := range b {
				b[j] = 'a' + byte(rng.IntN(26))
			}
			if l >= 9 && l <= 16 { // share the first or the last 8 bytes with other candidates
				if i%2 == 1 {
					copy(b, "prefix!!")
				} else {
					copy(b[l-8:], "!!suffix")
				}
			}
			key := string(b)
			h := c.m.Hash(key)
			g := tag(h) | uint64(home(h, minSlots))
			groups[g] = append(groups[g], key)
			if len(groups[g]) == n {
				out = append(out, groups[g]...)
				break
			}
			if l == 0 || (l < 3 && i > 5000) {
				out = append(out, key)
				break
			}
		}
	}
	return out
}

// TestCollisions: keys of every length class whose hashes share the
// tag and the home slot are told apart by Find, Lookup and LookupLong,
// through spends, removals (dead slots left in their probe chains),
// re-insertions further along the chain, policy changes and rebuilds, in
// one segment.
func TestCollisions(t *testing.T) {
	for _, hashed := range []bool{false, true} {
		t.Run(fmt.Sprint("hashed=", hashed), func(t *testing.T) {
			c := newChecker(t, 1, hashed)
			pols := policies(t)
			keys := diffColliding(c, 4, []int{0, 1, 7, 8, 9, 12, 15, 16, 17, 200})
			if len(keys) < 8*4 {
				t.Fatalf("found only %d colliding keys", len(keys))
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for round := range 400 {
				key := keys[rng.IntN(len(keys))]
				rs := pols[rng.IntN(len(pols))]
				all := make([]rules.State, 3)
				for j := range all {
					all[j] = rules.State(rng.Uint64N(1 << 40))
				}
				s := all[:rs.Len()]
				switch rng.IntN(6) {
				case 0, 1:
					c.insert(key, rs, s)
				case 2:
					c.spend(key, all)
				case 3:
					c.retire(key)
				case 4:
					c.carry(key, rs, s)
				case 5:
					if _, ok := c.model[key]; ok {
						c.staleSpend(key, s[0])
					}
				}
				c.check(keys...)
				_ = round
			}
		})
	}
}

// TestHugeKeys: keys of 64 KiB less one, 64 KiB, 64 KiB and one, and
// 1 MiB (records in chunks of their own, and at the 16-bit offset's edge)
// among small keys that fill the chunks around them, through rebuilds.
func TestHugeKeys(t *testing.T) {
	c := newChecker(t, 2, false)
	pols := policies(t)
	var keys []string
	for i, n := range []int{1<<16 - 3, 1<<16 - 1, 1 << 16, 1<<16 + 1, 1 << 20, 40000, 30000} {
		keys = append(keys, strings.Repeat(string(rune('a'+i)), n))
	}
	for i := range 300 {
		keys = append(keys, fmt.Sprintf("small-%d", i))
	}
	for i, key := range keys {
		rs := pols[i%3]
		s := make([]rules.State, rs.Len())
		for j := range s {
			s[j] = rules.State(i*10 + j)
		}
		c.insert(key, rs, s)
	}
	c.check()
	for i, key := range keys {
		if i%3 == 0 {
			c.retire(key)
		}
	}
	c.check(keys...)
	for i := range c.m.Segments() {
		c.m.Rebuild(c.m.At(i))
	}
	c.check(keys...)
}
