package flatmap

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// refHash is Hash written out plainly over the key's bytes, as Go's
// runtime writes memhashFallback: the reference Hash's word loads, its
// inlined Short and its loops must agree with.
func refHash(seed Seed, key []byte) uint64 {
	r8 := func(i int) uint64 { return binary.LittleEndian.Uint64(key[i:]) }
	r4 := func(i int) uint64 { return uint64(binary.LittleEndian.Uint32(key[i:])) }
	mx := func(a, b uint64) uint64 { hi, lo := bits.Mul64(a, b); return hi ^ lo }
	s := len(key)
	var a, b uint64
	k := seed.k0
	switch {
	case s == 0:
	case s < 4:
		a = uint64(key[0])<<16 | uint64(key[s>>1])<<8 | uint64(key[s-1])
	case s < 8:
		a, b = r4(0), r4(s-4)
	case s <= 16:
		a, b = r8(0), r8(s-8)
	default:
		p, l := 0, s
		if l > 48 {
			k1, k2 := k, k
			for ; l > 48; l -= 48 {
				k = mx(r8(p)^seed.k1, r8(p+8)^k)
				k1 = mx(r8(p+16)^seed.k2, r8(p+24)^k1)
				k2 = mx(r8(p+32)^seed.k3, r8(p+40)^k2)
				p += 48
			}
			k ^= k1 ^ k2
		}
		for ; l > 16; l -= 16 {
			k = mx(r8(p)^seed.k1, r8(p+8)^k)
			p += 16
		}
		a, b = r8(p+l-16), r8(p+l-8)
	}
	return mx(m5^uint64(s), mx(a^seed.k1, b^k))
}

// TestHashReference checks Hash against refHash for every length from 0
// to 200 (each of its cases and the boundaries of its loops), under three
// seeds, and Short against Hash.
func TestHashReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, seed := range []Seed{{}, {1, 2, 3, 4}, MakeSeed()} {
		for n := range 201 {
			key := make([]byte, n)
			for i := range key {
				key[i] = byte(r.Uint32())
			}
			got, want := seed.Hash(string(key)), refHash(seed, key)
			if got != want {
				t.Errorf("seed %v: Hash of %d bytes = %#x, reference %#x", seed, n, got, want)
			}
			if h, ok := seed.Short(string(key)); ok != (n >= 8 && n <= 16) || ok && h != want {
				t.Errorf("seed %v: Short of %d bytes = %#x, %v; want %#x, %v", seed, n, h, ok, want, n >= 8 && n <= 16)
			}
		}
	}
}

// TestHashSeeded checks that the seed is the hash's: a key hashes
// differently under each of 64 random seeds (collisions among them have
// probability about 2^-53), for an empty key, a short one, a 16-byte one
// and a long one, and under seeds that differ in one word only.
func TestHashSeeded(t *testing.T) {
	for _, key := range []string{"", "ab", "0123456789abcdef", string(make([]byte, 100))} {
		seen := map[uint64]bool{}
		for range 64 {
			h := MakeSeed()
			if seen[h.Hash(key)] {
				t.Fatalf("key %q: two random seeds gave one hash", key)
			}
			seen[h.Hash(key)] = true
		}
		base := Seed{1, 2, 3, 4}
		words := []Seed{{1 ^ 1<<17, 2, 3, 4}, {1, 2 ^ 1<<17, 3, 4}, {1, 2, 3 ^ 1<<17, 4}, {1, 2, 3, 4 ^ 1<<17}}
		if len(key) <= 48 {
			words = words[:2] // only a key of over 48 bytes reads k2 and k3
		}
		for w, s := range words {
			if s.Hash(key) == base.Hash(key) {
				t.Errorf("key %q: seed word %d changed, hash did not", key, w)
			}
		}
	}
}

// TestHashAvalanche checks that one flipped bit of a 16-byte key flips
// each bit of its hash with probability near 1/2 (from 0.45 to 0.55 over
// 2000 keys and all 128 input bits: 256000 trials per output bit, where
// a fair coin strays past 0.01 with probability below 10^-20), so that
// the table's home slot (low bits), tag (bits 32-39) and stripe (top
// bits) are each spread by every input bit. The keys and seed are fixed.
func TestHashAvalanche(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	seed := Seed{r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64()}
	var flips [64]int
	trials := 0
	key := make([]byte, 16)
	for range 2000 {
		binary.LittleEndian.PutUint64(key, r.Uint64())
		binary.LittleEndian.PutUint64(key[8:], r.Uint64())
		h := seed.Hash(string(key))
		for bit := range 128 {
			key[bit/8] ^= 1 << (bit % 8)
			d := h ^ seed.Hash(string(key))
			key[bit/8] ^= 1 << (bit % 8)
			for o := range 64 {
				flips[o] += int(d >> o & 1)
			}
			trials++
		}
	}
	for o, f := range flips {
		if p := float64(f) / float64(trials); p < 0.45 || p > 0.55 {
			t.Errorf("output bit %d flipped in %.3f of trials, want about 0.5", o, p)
		}
	}
}
