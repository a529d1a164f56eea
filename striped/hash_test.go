package striped

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"hash/maphash"
	"testing"

	"github.com/keyrate/keyrate/internal/racetest"
)

// BenchmarkHash compares two seeded hashes the striped store could use to
// pick a stripe: hash/maphash (kept: the runtime's AES-based string hash,
// seeded per store) and FNV-1a (hash/fnv's algorithm, written inline so that
// no interface call or []byte conversion is measured), seeded by hashing the
// seed's 8 bytes before the key (FNV has no seed of its own). Neither needs
// a module outside the standard library; the xxhash comparison that chose
// maphash is recorded in the package documentation.
//
//	go test -run '^$' -bench Hash -count 10 ./striped/ | benchstat -col /hash -
func BenchmarkHash(b *testing.B) {
	racetest.Bench()
	for _, n := range []int{8, 16, 64} {
		key := string(make([]byte, n))
		b.Run(fmt.Sprintf("hash=maphash/len=%d", n), func(b *testing.B) {
			seed := maphash.MakeSeed()
			var sink uint64
			for i := 0; i < b.N; i++ {
				sink += maphash.String(seed, key)
			}
			_ = sink
		})
		b.Run(fmt.Sprintf("hash=fnv1a/len=%d", n), func(b *testing.B) {
			var seed [8]byte
			binary.LittleEndian.PutUint64(seed[:], 0x9e3779b97f4a7c15)
			var sink uint64
			for i := 0; i < b.N; i++ {
				sink += fnv1a(seed, key)
			}
			_ = sink
		})
	}
}

// fnv1a is the 64-bit FNV-1a hash of seed's bytes followed by key's, as
// hash/fnv's New64a computes it.
func fnv1a(seed [8]byte, key string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for _, c := range seed {
		h = (h ^ uint64(c)) * prime
	}
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * prime
	}
	return h
}

// TestFNV1a checks BenchmarkHash's inline FNV-1a against hash/fnv, so that
// the benchmark measures the hash it names.
func TestFNV1a(t *testing.T) {
	seed := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	for _, key := range []string{"", "a", "alice", string(make([]byte, 64))} {
		d := fnv.New64a()
		_, _ = d.Write(seed[:])
		_, _ = d.Write([]byte(key))
		if got, want := fnv1a(seed, key), d.Sum64(); got != want {
			t.Errorf("fnv1a(%v, %q) = %#x, hash/fnv gives %#x", seed, key, got, want)
		}
	}
}

// TestSeededHashSpreads checks that keys spread over stripes: with 64
// stripes and 64k sequential keys no stripe gets twice its share.
func TestSeededHashSpreads(t *testing.T) {
	s, err := New(limitForTest, WithStripes(64))
	if err != nil {
		t.Fatal(err)
	}
	var counts [64]int
	var buf [8]byte
	for i := 0; i < 1<<16; i++ {
		binary.LittleEndian.PutUint64(buf[:], uint64(i))
		counts[maphash.String(s.seed, string(buf[:]))>>s.tab.shift]++
	}
	for i, c := range counts {
		if c > 2*(1<<16)/64 || c < (1<<16)/64/2 {
			t.Fatalf("stripe %d got %d of 65536 keys, want about 1024", i, c)
		}
	}
}
