package striped

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/keyrate/keyrate/internal/racetest"
)

// BenchmarkHash compares the two seeded hashes the striped store could use
// to pick a stripe: hash/maphash (kept: the runtime's AES-based string hash,
// seeded per store) and xxhash with a per-process seed (xxhash has no
// one-shot seeded form, so the seed goes through a Digest on the stack).
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
		b.Run(fmt.Sprintf("hash=xxhash/len=%d", n), func(b *testing.B) {
			var seed uint64 = 0x9e3779b97f4a7c15
			var sink uint64
			for i := 0; i < b.N; i++ {
				d := xxhash.NewWithSeed(seed)
				_, _ = d.WriteString(key)
				sink += d.Sum64()
			}
			_ = sink
		})
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
		counts[maphash.String(s.seed, string(buf[:]))&s.mask]++
	}
	for i, c := range counts {
		if c > 2*(1<<16)/64 || c < (1<<16)/64/2 {
			t.Fatalf("stripe %d got %d of 65536 keys, want about 1024", i, c)
		}
	}
}
