package inflight_test

import (
	"fmt"
	"testing"

	"github.com/keyrate/keyrate/inflight"
)

// FuzzModel replays a sequence of operations, each one byte, on a Store
// of 3 slots per key (1 reserved) and on a model (a count per key, and
// which slots are still held), and fails at the first answer that
// differs: acquires (ordinary and critical) on 3 keys, releases of held
// slots, second releases of released ones (which must free nothing, even
// after their holder was reused), and sweeps. The invariant: a key never
// holds more than its limit, an ordinary acquire is admitted exactly while
// fewer than n-r are held, a critical one while fewer than n.
func FuzzModel(f *testing.F) {
	for _, seed := range []string{"", "\x00\x00\x00\x03\x00", "\x00\x01\x02\x04\x05\x06\x07\x08\x09", "\x00\x08\x00\x0c\x0c\x00\x00\x0b\x10\x00"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		const n, reserved, keys = 3, 1, 3
		s, err := inflight.New(n, inflight.WithReserved(reserved))
		if err != nil {
			t.Fatal(err)
		}
		type slot struct {
			key  int
			s    inflight.Slot
			held bool
		}
		var slots []slot
		var count [keys]int
		for i, op := range ops {
			key := int(op>>2) % keys
			name := fmt.Sprint("k", key)
			switch op & 3 {
			case 0, 1: // acquire: ordinary (0) or critical (1)
				limit, sl := n-reserved, inflight.Slot{}
				if op&3 == 1 {
					limit = n
					sl, err = s.TryAcquireCritical(name)
				} else {
					sl, err = s.TryAcquire(name)
				}
				if err != nil {
					t.Fatalf("op %d: %v", i, err)
				}
				if want := count[key] < limit; sl.Acquired() != want {
					t.Fatalf("op %d: acquire of %s (critical %v) with %d held = %v, want %v", i, name, op&3 == 1, count[key], sl.Acquired(), want)
				}
				if sl.Acquired() {
					count[key]++
					slots = append(slots, slot{key, sl, true})
				}
			case 2: // release the op-th slot, held or not
				if len(slots) == 0 {
					continue
				}
				j := int(op>>2) % len(slots)
				slots[j].s.Release()
				if slots[j].held {
					slots[j].held = false
					count[slots[j].key]--
				}
			case 3:
				s.Sweep()
			}
		}
		for k := range keys {
			for range n - count[k] {
				if sl, _ := s.TryAcquireCritical(fmt.Sprint("k", k)); !sl.Acquired() {
					t.Fatalf("k%d: fewer than the %d free slots the model has", k, n-count[k])
				}
			}
			if sl, _ := s.TryAcquireCritical(fmt.Sprint("k", k)); sl.Acquired() {
				t.Fatalf("k%d: a slot past the limit", k)
			}
		}
	})
}
