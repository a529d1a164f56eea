package flatmap

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/rules"
)

// seekState is the window-0 state the writer of TestSeekConcurrent gives
// key k under policy p at its n-th store: a reader can tell from it whose
// state, under which policy, it read.
func seekState(k, p, n int) rules.State {
	return rules.State(k)<<40 | rules.State(p)<<32 | rules.State(n&0xffffffff)
}

// TestSeekConcurrent runs Seek on every goroutine but one while that one,
// holding the lock the readers do not take, inserts, evicts, moves keys
// between policies of 1, 2 and 3 windows (new records), stores states,
// tidies (shrinking) and grows the table (rehashing, compacting). Each
// state names its key and its policy, so a Seek that reported true for a
// slot the writer had moved, a record of another arena, or a policy that
// changed under it would read another key's state or a state of another
// policy, and fail. Under -race it also shows that every word Seek reads is
// written atomically or before its publication.
func TestSeekConcurrent(t *testing.T) {
	pols := policies(t)
	for _, hashed := range []bool{false, true} {
		t.Run(fmt.Sprintf("hashed=%v", hashed), func(t *testing.T) {
			var (
				mu   sync.Mutex
				seed = MakeSeed()
				m    Map
				keys [96]string
				stop atomic.Bool
				hits atomic.Int64
				wg   sync.WaitGroup
			)
			m.Init(&seed, hashed)
			for k := range keys { // lengths 1 to 40: the short and the long compares
				keys[k] = fmt.Sprintf("%d-%s", k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"[:k%40])
			}
			polOf := func(rs *rules.Rules) int {
				for p, q := range pols {
					if q == rs {
						return p
					}
				}
				return -1
			}
			// The writer runs at least ops operations, and on until the
			// readers have found keys wantHits times (at most maxOps), so
			// that reads overlap writes however the goroutines are scheduled.
			ops, wantHits, maxOps := 20_000, int64(20_000), 2_000_000
			if testing.Short() {
				ops, wantHits = 4_000, 4_000
			}
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(rand.Uint64(), 1))
					for !stop.Load() {
						k, p := r.IntN(len(keys)), r.IntN(len(pols))
						_, first, ok := m.SeekLong(keys[k], seed.Hash(keys[k]), pols[p], m.Version())
						if !ok {
							continue
						}
						hits.Add(1)
						if gk, gp := int(first>>40), int(first>>32&0xff); gk != k || gp != p {
							t.Errorf("Seek(%q) under policy %d read the state of key %d under policy %d", keys[k], p, gk, gp)
							stop.Store(true)
						}
					}
				}()
			}
			r := rand.New(rand.NewPCG(1, 2))
			var s [keyrate.MaxLimits]rules.State
			for n := 0; n < ops || hits.Load() < wantHits && n < maxOps; n++ {
				k, p := r.IntN(len(keys)), r.IntN(len(pols))
				key, h := keys[k], seed.Hash(keys[k])
				for w := range s {
					s[w] = seekState(k, p, n)
				}
				mu.Lock()
				i, ok := m.Find(key, h)
				switch op := r.IntN(8); {
				case !ok && op < 5:
					m.Insert(key, h, pols[p], s[:pols[p].Len()])
				case ok && op < 3:
					q := polOf(m.Rules(i))
					for w := range s {
						s[w] = seekState(k, q, n)
					}
					m.Store(i, s[:m.Rules(i).Len()])
				case ok && op < 5:
					m.SetRules(i, pols[p], s[:pols[p].Len()])
				case ok && op < 7:
					m.Delete(i)
				case op == 7:
					m.Tidy()
				}
				mu.Unlock()
			}
			stop.Store(true)
			wg.Wait()
			if hits.Load() == 0 {
				t.Errorf("no Seek found a key: the test checked nothing")
			}
		})
	}
}

// TestSeekInterleaved runs one change of the lock's owner inside Seek,
// between its finding key's slot and its reading the state there
// (pauseSeek), every run: a deletion that moves the next key of the
// probe run into the slot, a move of the key to a policy of another window
// count, a growth of the table. Seek must then report false (the caller
// takes the lock), where a Seek that did not check its sequence count
// again would return the other key's state, or the new policy's state as
// the old one's. A change to the key's state alone must not make it fail:
// it returns the state it read, a state the key held.
func TestSeekInterleaved(t *testing.T) {
	pols := policies(t)
	seed := Seed{1, 2, 3, 4}
	// Keys of one home slot in the first table (8 slots), so that they sit
	// in one probe run, the second right after the first.
	var keys []string
	for i := 0; len(keys) < 3; i++ {
		if k := fmt.Sprintf("same-home-%05d", i); home(seed.Hash(k), minSlots) == 0 {
			keys = append(keys, k)
		}
	}
	setup := func() *Map {
		m := new(Map)
		m.Init(&seed, false)
		for j, k := range keys {
			m.Insert(k, seed.Hash(k), pols[0], []rules.State{rules.State(100 + j)})
		}
		return m
	}

	for _, c := range []struct {
		name  string
		owner func(m *Map)
		ok    bool
	}{
		{"delete", func(m *Map) { i, _ := m.Find(keys[0], seed.Hash(keys[0])); m.Delete(i) }, false},
		{"policy", func(m *Map) {
			i, _ := m.Find(keys[0], seed.Hash(keys[0]))
			m.SetRules(i, pols[1], []rules.State{7, 8})
		}, false},
		{"growth", func(m *Map) {
			for k := range 16 {
				m.Insert(fmt.Sprint("more-", k), seed.Hash(fmt.Sprint("more-", k)), pols[0], []rules.State{1})
			}
		}, false},
		{"state", func(m *Map) { i, _ := m.Find(keys[0], seed.Hash(keys[0])); m.SetFirst(i, 42) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := setup()
			var (
				i     Hit
				first rules.State
				ok    bool
			)
			pauseSeek(t, func() { i, first, ok = m.Seek(keys[0], seed.Hash(keys[0]), pols[0], m.Version()) }, func() { c.owner(m) })
			if ok != c.ok {
				t.Fatalf("Seek after a %s inside it = slot %v, state %d, %v; want %v", c.name, i, first, ok, c.ok)
			}
			if ok && first != 42 {
				t.Fatalf("Seek = state %d, want 42, the state stored inside it", first)
			}
		})
	}
}

// pauseSeek runs seek on a goroutine of its own, holds it inside Seek
// once Seek has found its key's slot (testSeekPause), runs owner there on
// the calling goroutine, then lets the Seek go on and waits for it. It
// fails the test if seek returns without having reached that point.
func pauseSeek(t *testing.T, seek, owner func()) {
	t.Helper()
	testSeekPaused.Store(0)
	testSeekPause.Store(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		seek()
	}()
	for testSeekPaused.Load() == 0 {
		select {
		case <-done:
			testSeekPause.Store(0)
			t.Fatal("Seek returned without finding the key")
		default:
			runtime.Gosched()
		}
	}
	owner()
	testSeekPause.Store(0)
	<-done
}
