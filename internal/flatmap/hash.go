package flatmap

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"unsafe"
)

// Seed is the secret of a keyed hash (Hash): four 64-bit keys drawn at
// random by MakeSeed. A caller hashes every key of a Map with the seed it
// gave Init, and picks its lock from the same hash.
//
// The zero Seed is a valid seed that every process knows; only tests
// should use it.
type Seed struct{ k0, k1, k2, k3 uint64 }

// MakeSeed returns a new random seed: four words of math/rand/v2's
// default source, the runtime's ChaCha8 generator seeded from the
// operating system's entropy (the generator behind the runtime's own map
// seeds and hash/maphash.MakeSeed), so no two stores, or processes, share
// one.
func MakeSeed() Seed {
	return Seed{rand.Uint64(), rand.Uint64(), rand.Uint64(), rand.Uint64()}
}

// m5 is the odd constant of the final multiply, Go's runtime's (see Hash).
const m5 = 0x1d8e4e27c47d124f

// Hash returns the 64-bit hash of key under seed.
//
// It is the wyhash construction that Go's runtime uses for its own maps
// on processors without AES instructions (runtime/hash64.go,
// memhashFallback), keyed the same way: every input word is XORed with a
// secret word before it is multiplied (a key word with k1, or k2 and k3
// for keys of over 48 bytes; the word beside it with a running value
// that starts at the secret k0), and each 128-bit product is folded to 64
// bits (mix). Why that keeps an open-addressing table, whose probes an
// attacker would like to lengthen, safe from flooding: without the seed
// an attacker cannot compute any key's hash, nor aim for a degenerate
// product (a word equal to its secret makes the product 0 whatever the
// other word, but finding one takes about 2^64 guesses), and no input
// word meets a public constant before it has met a secret, so there is
// none of the seed-independent collisions found in hashes that do (XXH32,
// or rapidhash keyed by one 64-bit seed). The final multiplier, m5, is
// public, as in the runtime, where it only spreads a value that is
// already secret. A collision of whole hashes, which merges two keys under
// keyrate.WithHashedKeys, is then as hard to craft.
//
// A key of 8 to 16 bytes, the common case, is two overlapping 8-byte loads
// and two multiplies, with no loop (Short, which inlines): about 20
// instructions, against about 60 for hash/maphash.String, whose per-call
// wrapper and runtime dispatch cost more than its AES rounds on a short
// key. Hash makes no call, so it needs no stack check.
func (seed *Seed) Hash(key string) uint64 {
	n := len(key)
	var a, b uint64
	k := seed.k0
	switch {
	case n >= 8 && n <= 16:
		h, _ := seed.Short(key)
		return h
	case n > 16:
		// Every 16-byte block but the last folded into k (three running
		// values over 48-byte blocks, as the runtime does), then the key's
		// last 16 bytes, which overlap bytes already folded in when fewer
		// than 16 are left. (In this function, not one of its own, so
		// that Hash makes no call and needs no stack frame.)
		p := key
		if len(p) > 48 {
			k1, k2 := k, k
			for ; len(p) > 48; p = p[48:] {
				k = mix(load64(p, 0)^seed.k1, load64(p, 8)^k)
				k1 = mix(load64(p, 16)^seed.k2, load64(p, 24)^k1)
				k2 = mix(load64(p, 32)^seed.k3, load64(p, 40)^k2)
			}
			k ^= k1 ^ k2
		}
		for ; len(p) > 16; p = p[16:] {
			k = mix(load64(p, 0)^seed.k1, load64(p, 8)^k)
		}
		a, b = sword(key, n-16), sword(key, n-8)
	case n >= 4:
		a, b = uint64(load32(key, 0)), uint64(load32(key, n-4))
	case n > 0:
		a = uint64(key[0])<<16 | uint64(key[n>>1])<<8 | uint64(key[n-1])
	}
	return mix(m5^uint64(n), mix(a^seed.k1, b^k))
}

// Short returns Hash(key) and true for a key of 8 to 16 bytes, and 0 and
// false for any other: the common case, small enough to be inlined into a
// store's hot path, which calls Hash only when it reports false.
func (seed *Seed) Short(key string) (uint64, bool) {
	n := uint(len(key))
	if n-8 > 8 { // n < 8 || n > 16, in one comparison
		return 0, false
	}
	hi, lo := bits.Mul64(sword(key, 0)^seed.k1, sword(key, int(n-8))^seed.k0)
	hi, lo = bits.Mul64(m5^uint64(n), hi^lo)
	return hi ^ lo, true
}

// mix returns the 128-bit product of a and b folded to 64 bits.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// load64 returns the 8 bytes of s from i as a little-endian word.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// load32 returns the 4 bytes of s from i as a little-endian word.
func load32(s string, i int) uint32 {
	s = s[i : i+4]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// sword returns the 8 bytes of s from i as a little-endian word; the
// caller has checked that i+8 <= len(s). (As word does for the arena: a
// load with no bounds check of its own, one instruction on amd64 and
// arm64.)
func sword(s string, i int) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(s)), i))[:])
}
