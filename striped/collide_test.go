package striped_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/flatmap"
	"github.com/keyrate/keyrate/striped"
)

// sameHashKeys returns count keys of n bytes that all have one hash under
// the zero seed: wyhash multiplies each 16-byte block's first word by its
// second, so a block whose first word is zero contributes nothing of its
// second word (bytes 8 to 15 of the block). The keys differ only there, in
// the block at byte at (a multiple of 48 for keys over 48 bytes, of 16 for
// keys of 17 to 48, 0 for keys of 8 to 16), and are zeros elsewhere but
// for their last byte.
func sameHashKeys(t *testing.T, n, at, count int) []string {
	t.Helper()
	var zero flatmap.Seed
	keys := make([]string, count)
	for i := range keys {
		b := make([]byte, n)
		b[n-1] = 'z'
		binary.LittleEndian.PutUint64(b[at+8:], uint64(i)+1)
		keys[i] = string(b)
		if h, h0 := zero.Hash(keys[i]), zero.Hash(keys[0]); h != h0 {
			t.Fatalf("key %d of %d bytes: hash %#x, key 0's %#x: not a collision", i, n, h, h0)
		}
	}
	return keys
}

// TestSameHashKeys gives a one-stripe store, hashing under the zero seed,
// keys whose whole 64-bit hashes are equal (one home slot, one tag, one
// stripe: a Robin Hood run as long as the key count), of 16, 32, 1000
// bytes and 1 MiB, differing only in 8 bytes, past byte 16 for the long
// ones. Each must get its own burst; refunding every other key full and
// sweeping evicts half of each run from its middle (backward-shift
// deletion among keys of one home) and must leave the others' states as
// they were, and the evicted keys start full.
func TestSameHashKeys(t *testing.T) {
	var keys []string
	keys = append(keys, sameHashKeys(t, 16, 0, 120)...)
	keys = append(keys, sameHashKeys(t, 32, 0, 60)...)
	keys = append(keys, sameHashKeys(t, 1000, 48*5, 40)...)
	keys = append(keys, sameHashKeys(t, 1<<20, 48*1000, 3)...)
	s, err := striped.New(keyrate.Limit{Rate: 1, Per: time.Hour, Burst: 3},
		keyrate.WithClock(clock.NewManual(time.Hour)), striped.WithStripes(1))
	if err != nil {
		t.Fatal(err)
	}
	striped.UseZeroSeed(s)
	for round := range 4 {
		for i, k := range keys {
			if got, want := s.Allow(k), round < 3; got != want {
				t.Fatalf("round %d: Allow(key %d, %d bytes) = %v, want %v", round, i, len(k), got, want)
			}
		}
	}
	if got := s.Len(); got != len(keys) {
		t.Fatalf("Len() = %d, want %d", got, len(keys))
	}
	for i, k := range keys {
		if i%2 == 0 {
			if err := s.Refund(k, 3); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := s.Sweep(), (len(keys)+1)/2; got != want {
		t.Fatalf("Sweep() = %d, want %d (the refunded keys)", got, want)
	}
	for i, k := range keys {
		d, err := s.AllowN(k, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := i%2 == 0; d.Allowed != want || (want && d.Remaining != 2) {
			t.Fatalf("after the sweep, key %d (%d bytes): %+v, want allowed %v", i, len(k), d, want)
		}
	}
}

// TestSameHashKeysHashed is TestSameHashKeys's 16-byte keys under
// keyrate.WithHashedKeys: keys with one hash are one key there, as its
// documentation says, and so share one burst between them (a collision
// only ever denies more).
func TestSameHashKeysHashed(t *testing.T) {
	keys := sameHashKeys(t, 16, 0, 20)
	s, err := striped.New(keyrate.Limit{Rate: 1, Per: time.Hour, Burst: 3},
		keyrate.WithClock(clock.NewManual(time.Hour)), striped.WithStripes(1), keyrate.WithHashedKeys())
	if err != nil {
		t.Fatal(err)
	}
	striped.UseZeroSeed(s)
	admitted := 0
	for _, k := range keys {
		if s.Allow(k) {
			admitted++
		}
	}
	if admitted != 3 || s.Len() != 1 {
		t.Fatalf("%d keys of one hash admitted %d and are %d keys, want 3 and 1", len(keys), admitted, s.Len())
	}
}

// TestKeysDifferPastByte16 checks keys of 17 to 1000 bytes that share
// their first 16 bytes and their last 16 (the bytes the hash's final
// block and the table's fast compare read) and differ in one byte between:
// each is a key of its own.
func TestKeysDifferPastByte16(t *testing.T) {
	for _, n := range []int{33, 48, 49, 64, 97, 1000} {
		t.Run(fmt.Sprint("bytes=", n), func(t *testing.T) {
			s, err := striped.New(keyrate.Limit{Rate: 1, Per: time.Hour, Burst: 1},
				keyrate.WithClock(clock.NewManual(time.Hour)), striped.WithStripes(1))
			if err != nil {
				t.Fatal(err)
			}
			base := strings.Repeat("p", n)
			for i := 16; i < n-16; i++ {
				k := base[:i] + "q" + base[i+1:]
				if !s.Allow(k) {
					t.Fatalf("key differing at byte %d of %d denied: merged with another", i, n)
				}
			}
			if !s.Allow(base) || s.Allow(base) {
				t.Fatalf("the base key of %d bytes is not a key of its own", n)
			}
		})
	}
}
