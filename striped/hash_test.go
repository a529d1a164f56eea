package striped

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
	"testing"

	"github.com/keyrate/keyrate/internal/flatmap"
	"github.com/keyrate/keyrate/internal/racetest"
)

// BenchmarkHash compares the store's hash, flatmap.Seed.Hash (a keyed
// wyhash, as Go's runtime hashes map keys without AES instructions), with
// hash/maphash.String (the runtime's AES hash behind a per-call wrapper),
// which the store used before: for the 16-byte keys of the benchmarks the
// wyhash took 28 instructions as a call to maphash's 61 (callgrind,
// BenchmarkAllow store=striped wl=hotkey), and about 20 inlined
// (Seed.Short), as the store's hot path runs it.
//
//	go test -run '^$' -bench Hash -count 10 ./striped/ | benchstat -col /hash -
func BenchmarkHash(b *testing.B) {
	racetest.Bench()
	for _, n := range []int{8, 16, 64} {
		key := string(make([]byte, n))
		b.Run(fmt.Sprintf("hash=wyhash/len=%d", n), func(b *testing.B) {
			seed := flatmap.MakeSeed()
			var sink uint64
			for i := 0; i < b.N; i++ {
				sink += seed.Hash(key)
			}
			_ = sink
		})
		b.Run(fmt.Sprintf("hash=maphash/len=%d", n), func(b *testing.B) {
			seed := maphash.MakeSeed()
			var sink uint64
			for i := 0; i < b.N; i++ {
				sink += maphash.String(seed, key)
			}
			_ = sink
		})
	}
}

// seqKey returns the 8-byte key numbered i.
func seqKey(i int) string {
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], uint64(i))
	return string(buf[:])
}

// TestSeededHashSpreads checks that keys spread over stripes: with 64
// stripes and 64k sequential keys no stripe gets twice its share.
func TestSeededHashSpreads(t *testing.T) {
	s, err := New(limitForTest, WithStripes(64))
	if err != nil {
		t.Fatal(err)
	}
	var counts [64]int
	for i := 0; i < 1<<16; i++ {
		counts[s.tab.index(s.seed.Hash(seqKey(i)))]++
	}
	for i, c := range counts {
		if c > 2*(1<<16)/64 || c < (1<<16)/64/2 {
			t.Fatalf("stripe %d got %d of 65536 keys, want about 1024", i, c)
		}
	}
}

// TestSeedsOrderSlots checks that the seed is drawn per store: two stores
// given the same keys put them on different stripes and, in a store of
// one stripe, in different slot orders, so keys crafted to collide in
// one store (were its seed known) do not in another.
func TestSeedsOrderSlots(t *testing.T) {
	const keys = 256
	stripeOf := func(s *Store) []int {
		var out []int
		for i := range keys {
			out = append(out, int(s.tab.index(s.seed.Hash(seqKey(i)))))
		}
		return out
	}
	slotOrder := func(s *Store) []string {
		sp := &s.tab.stripes[0]
		slot := map[string]int{}
		var out []string
		for i := range keys {
			k := seqKey(i)
			if !s.Allow(k) {
				t.Fatalf("Allow(%q) = false on a new key", k)
			}
			j, ok := sp.m.Find(k, s.seed.Hash(k))
			if !ok {
				t.Fatalf("key %q missing after Allow", k)
			}
			slot[k] = j
			out = append(out, k)
		}
		slices.SortFunc(out, func(a, b string) int { return slot[a] - slot[b] })
		return out
	}
	a, err := New(limitForTest, WithStripes(64))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(limitForTest, WithStripes(64))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(stripeOf(a), stripeOf(b)) {
		t.Errorf("two stores put %d keys on the same stripes", keys)
	}
	c, err := New(limitForTest, WithStripes(1))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(limitForTest, WithStripes(1))
	if err != nil {
		t.Fatal(err)
	}
	if oc, od := slotOrder(c), slotOrder(d); slices.Equal(oc, od) {
		t.Errorf("two stores of one stripe hold %d keys in the same slot order", keys)
	}
}
