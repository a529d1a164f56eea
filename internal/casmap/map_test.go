package casmap

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/sweep"
)

// policies returns conformance.CompiledPolicies: three policies of 1,
// 2 and 3 windows.
func policies(tb testing.TB) []*rules.Rules { return conformance.CompiledPolicies(tb) }

// entry is the model's value for one key.
type entry struct {
	rs     *rules.Rules
	states []rules.State
}

// checker holds a Map beside a plain map, the model it must agree with.
type checker struct {
	tb    testing.TB
	m     Map
	model map[string]entry
	floor sweep.Floor
}

func newChecker(tb testing.TB, segments int, hashed bool) *checker {
	c := &checker{tb: tb, model: map[string]entry{}}
	c.m.Init(segments, hashed)
	return c
}

// find looks key up without a lock, as a spender does.
func (c *checker) find(key string) (Ref, *Segment) {
	h := c.m.Hash(key)
	sg := c.m.Segment(h)
	return c.m.Find(sg, key, h), sg
}

// states returns the states of a live ref, locking a slot of several
// windows as a spender does.
func (c *checker) states(r Ref) []rules.State {
	c.tb.Helper()
	s := make([]rules.State, r.Rules().Len())
	if len(s) == 1 {
		s[0] = r.Load()
	} else {
		v, sentinel := r.Lock()
		if sentinel != 0 {
			c.tb.Fatalf("Lock on a live slot found %#x", uint64(sentinel))
		}
		r.LoadStates(v, s)
		r.Release(v)
	}
	if s[0] >= Moved {
		c.tb.Fatalf("a live slot holds sentinel %#x", uint64(s[0]))
	}
	return s
}

// insert adds key if the model lacks it.
func (c *checker) insert(key string, rs *rules.Rules, s []rules.State) {
	if _, ok := c.model[key]; ok {
		return
	}
	h := c.m.Hash(key)
	sg := c.m.Segment(h)
	sg.Lock()
	ok := c.m.Insert(sg, key, h, rs, s)
	sg.Unlock()
	if !ok {
		c.tb.Fatalf("Insert(%q) failed", key)
	}
	c.model[key] = entry{rs, slices.Clone(s)}
}

// spend sets key's states, if held, to s (cut to its window count), as a
// spender does: a compare-and-swap, or the slot's lock.
func (c *checker) spend(key string, s []rules.State) {
	r, _ := c.find(key)
	e, want := c.model[key]
	if r.Found() != want {
		c.tb.Fatalf("Find(%q) = %v, model holds it: %v", key, r.Found(), want)
	}
	if !want {
		return
	}
	s = s[:e.rs.Len()]
	if len(s) == 1 {
		if old := r.Load(); !r.CompareAndSwap(old, s[0]) {
			c.tb.Fatalf("CompareAndSwap(%#x) on %q failed with nothing else running", uint64(old), key)
		}
	} else {
		if _, sentinel := r.Lock(); sentinel != 0 {
			c.tb.Fatalf("Lock(%q) found %#x", key, uint64(sentinel))
		}
		r.Unlock(s)
	}
	copy(e.states, s)
}

// retire removes key, if held, and checks the states Retire returns.
func (c *checker) retire(key string) {
	h := c.m.Hash(key)
	sg := c.m.Segment(h)
	sg.Lock()
	defer sg.Unlock()
	r := c.m.Find(sg, key, h)
	e, ok := c.model[key]
	if r.Found() != ok {
		c.tb.Fatalf("Find(%q) under the lock = %v, model holds it: %v", key, r.Found(), ok)
	}
	if !ok {
		return
	}
	got := c.m.Retire(sg, r)
	if !slices.Equal(got[:e.rs.Len()], e.states) {
		c.tb.Fatalf("Retire(%q) = %v, want %v", key, got[:e.rs.Len()], e.states)
	}
	if r.Load() != rules.Tombstone {
		c.tb.Fatalf("a retired slot holds %#x", uint64(r.Load()))
	}
	delete(c.model, key)
}

// carry moves key, if held, to rs in states s: a new slot, as a change of
// policy makes.
func (c *checker) carry(key string, rs *rules.Rules, s []rules.State) {
	if _, ok := c.model[key]; !ok {
		return
	}
	c.retire(key)
	c.insert(key, rs, s)
}

// sweep removes, from every segment, the keys whose every window is full
// at reading t, and from the model the same keys.
func (c *checker) sweep(t time.Duration) {
	removed := 0
	for i := range c.m.Segments() {
		n, _ := c.m.Sweep(c.m.At(i), t, &c.floor)
		removed += n
	}
	want := 0
	for key, e := range c.model {
		if e.rs.Full(e.states, t) {
			delete(c.model, key)
			want++
		}
	}
	if removed != want {
		c.tb.Fatalf("Sweep at %v removed %d keys, the model %d", t, removed, want)
	}
}

// staleSpend is a spender that found key and loaded its state, then lost
// the race to a rebuild of key's segment: its compare-and-swap must fail
// (the rebuild copied the state it loaded, so a swap that landed would be
// lost), it must then load Moved, and a new lookup must find the state it
// loaded, which it then spends from.
func (c *checker) staleSpend(key string, next rules.State) {
	r, sg := c.find(key)
	e, ok := c.model[key]
	if !ok || e.rs.Len() != 1 {
		return
	}
	old := r.Load()
	c.m.Rebuild(sg)
	if r.CompareAndSwap(old, next) {
		c.tb.Fatalf("a swap on %q's slot succeeded after a rebuild copied it: the spend is lost", key)
	}
	if got := r.Load(); got != Moved {
		c.tb.Fatalf("the old slot of %q holds %#x after a rebuild, want Moved", key, uint64(got))
	}
	r, _ = c.find(key)
	if got := r.Load(); got != old {
		c.tb.Fatalf("the rebuilt slot of %q holds %#x, want %#x", key, uint64(got), uint64(old))
	}
	if !r.CompareAndSwap(old, next) {
		c.tb.Fatalf("the swap on %q's new slot failed", key)
	}
	e.states[0] = next
}

// check compares the whole map with the model, and the segments' counts
// and policy counts with their slots.
func (c *checker) check(absent ...string) {
	c.tb.Helper()
	live := 0
	for i := range c.m.Segments() {
		sg := c.m.At(i)
		sg.Lock()
		live += c.m.Len(sg)
		if t := sg.tab.Load(); t != nil {
			used, alive := 0, 0
			refs := make([]int, len(sg.refs))
			pols := *sg.pols.Load()
			for j := range t.slots {
				meta := t.slots[j].meta.Load()
				if meta == 0 {
					continue
				}
				used++
				if t.slots[j].state.Load() != uint64(rules.Tombstone) {
					alive++
					refs[meta>>polShift&polMask]++
				}
			}
			if used != t.used || alive != t.live || t.used*8 > len(t.slots)*7 {
				c.tb.Fatalf("segment %d: %d used and %d live slots of %d, counted %d and %d", i, used, alive, len(t.slots), t.used, t.live)
			}
			for p, n := range refs {
				if sg.refs[p] != n || (n == 0) != (pols[p] == nil) {
					c.tb.Fatalf("segment %d, policy %d: counts %d keys, %d use it, policy %p", i, p, sg.refs[p], n, pols[p])
				}
			}
		}
		sg.Unlock()
	}
	if live != len(c.model) {
		c.tb.Fatalf("the segments hold %d keys, the model %d", live, len(c.model))
	}
	for key := range c.model {
		c.checkKey(key)
	}
	for _, key := range absent {
		c.checkKey(key)
	}
}

// checkKey compares key alone with the model, and the hot path's lookup
// (Lookup or LookupLong, and Hash) with Find.
func (c *checker) checkKey(key string) {
	c.tb.Helper()
	r, _ := c.find(key)
	var s *Slot
	var rs *rules.Rules
	h := c.m.Hash(key)
	if Short(key) {
		var lh uint64
		if s, rs, lh = c.m.Lookup(key); lh != h {
			c.tb.Fatalf("Lookup(%q) hashed it to %#x, Hash to %#x", key, lh, h)
		}
	} else {
		s, rs = c.m.LookupLong(key, h)
	}
	if s != r.s || rs != r.rs {
		c.tb.Fatalf("the hot path's lookup of %q = %p %p, Find's %p %p", key, s, rs, r.s, r.rs)
	}
	e, want := c.model[key]
	if r.Found() != want {
		c.tb.Fatalf("Find(%q) = %v, model holds it: %v", key, r.Found(), want)
	}
	if want {
		if got := c.states(r); r.Rules() != e.rs || !slices.Equal(got, e.states) {
			c.tb.Fatalf("key %q: %s %v, want %s %v", key, r.Rules().Name(), got, e.rs.Name(), e.states)
		}
	}
}

// fuzzKey returns the key numbered k: lengths from 0 to past 127 (where
// a key's length takes two bytes), with 8- to 16-byte keys among them (the
// lookup's fast comparison).
func fuzzKey(k byte) string {
	n := []int{0, 1, 5, 9, 16, 130}[k%6]
	return fmt.Sprintf("%d:%s", k, strings.Repeat("x", n))
}

// maxOps is the most operations FuzzTable runs from one input.
const maxOps = 300

// FuzzTable runs random sequences of insertions, spends, removals, policy
// changes (new slots), sweeps, tidying (shrinking), bulk insertions
// (growth) and spends that lose a race to a rebuild on a Map of two
// segments and on a plain map, and checks after each that they hold the
// same keys in the same states (the key of each op after it, every key and
// the segments' counts every 32 ops and at the end).
func FuzzTable(f *testing.F) {
	f.Add(false, []byte{0, 1, 1, 2, 0, 3, 5, 7, 2, 9, 4, 0, 7, 3, 6, 40})
	f.Add(true, []byte{5, 0, 5, 1, 2, 3, 2, 4, 3, 5, 4, 1, 4, 0, 7, 5, 6, 200})
	f.Add(false, []byte{5, 1, 5, 2, 5, 3, 2, 0, 2, 1, 2, 2, 2, 3, 4, 0, 3, 7, 4, 1, 5, 63, 6, 255, 4, 0})
	pols := policies(f)
	f.Fuzz(func(t *testing.T, hashed bool, ops []byte) {
		if len(ops) > 2*maxOps { // each op checks a key: long inputs only slow the fuzzer
			ops = ops[:2*maxOps]
		}
		c := newChecker(t, 2, hashed)
		var s [keyrate.MaxLimits]rules.State
		for j := 0; j+1 < len(ops); j += 2 {
			op, arg := ops[j], ops[j+1]
			key := fuzzKey(arg)
			rs := pols[int(arg>>5)%len(pols)]
			for w := range s {
				s[w] = rules.State(uint64(arg)<<8 | uint64(j+w)&0xff)
			}
			switch op % 8 {
			case 0:
				c.insert(key, rs, s[:rs.Len()])
			case 1:
				c.spend(key, s[:])
			case 2:
				c.retire(key)
			case 3:
				c.carry(key, rs, s[:rs.Len()])
			case 4:
				for i := range c.m.Segments() {
					sg := c.m.At(i)
					sg.Lock()
					c.m.Tidy(sg)
					sg.Unlock()
				}
			case 5: // enough keys to grow the table, some of them long
				for k := range int(arg%64) + 1 {
					c.insert(fuzzKey(byte(k*7+int(arg))), rs, s[:rs.Len()])
				}
			case 6: // the keys full at a reading: states up to about arg<<8 ticks
				c.sweep(rs.Rule(0).Reading(rules.State(uint64(arg) << 8)))
			case 7:
				c.staleSpend(key, s[0])
			}
			if j%64 == 62 {
				c.check(key)
			} else {
				c.checkKey(key)
			}
		}
		c.check()
		for key := range c.model { // remove all: then Tidy empties every table
			c.retire(key)
		}
		c.check()
		for i := range c.m.Segments() {
			sg := c.m.At(i)
			sg.Lock()
			c.m.Tidy(sg)
			if tab := sg.tab.Load(); tab.used != 0 || len(tab.slots) != minSlots || len(*tab.chunks.Load()) != 0 {
				t.Fatalf("segment %d keeps %d slots (%d used) after its last key went", i, len(tab.slots), tab.used)
			}
			sg.Unlock()
		}
	})
}

// TestRebuildWaitsForLock: a rebuild that meets a slot of several windows
// held by a spender waits for it, and copies the states the spender left
// (copying the locked word, or the states before the spender wrote, would
// lose its spend).
func TestRebuildWaitsForLock(t *testing.T) {
	pols := policies(t)
	c := newChecker(t, 1, false)
	c.insert("held", pols[2], []rules.State{1, 2, 3})
	r, sg := c.find("held")
	if _, sentinel := r.Lock(); sentinel != 0 {
		t.Fatalf("Lock found %#x", uint64(sentinel))
	}
	var done sync.WaitGroup
	done.Go(func() { c.m.Rebuild(sg) })
	r.Unlock([]rules.State{4, 5, 6})
	done.Wait()
	if got := r.Load(); got != Moved {
		t.Fatalf("the old slot holds %#x after the rebuild, want Moved", uint64(got))
	}
	c.model["held"] = entry{pols[2], []rules.State{4, 5, 6}}
	c.check()
}

// TestSpendersAcrossRebuilds is the stress line of staleSpend: goroutines
// add 1 to the state of their keys by compare-and-swap, retrying after
// Moved as the store does, while another rebuilds the segment without
// pause; every add must land once.
func TestSpendersAcrossRebuilds(t *testing.T) {
	pols := policies(t)
	c := newChecker(t, 1, false)
	const keys, g = 16, 4
	n := 2000
	if testing.Short() {
		n = 500
	}
	for k := range keys {
		c.insert(fmt.Sprint("key-", k), pols[0], []rules.State{0})
	}
	var stop sync.WaitGroup
	quit := make(chan struct{})
	stop.Go(func() {
		for {
			select {
			case <-quit:
				return
			default:
				c.m.Rebuild(c.m.At(0))
			}
		}
	})
	var spenders sync.WaitGroup
	for range g {
		spenders.Go(func() {
			for i := range n {
				key := fmt.Sprint("key-", i%keys)
				for {
					r, sg := c.find(key)
					old := r.Load()
					if old == Moved {
						sg.Wait()
						continue
					}
					if r.CompareAndSwap(old, old+1) {
						break
					}
				}
			}
		})
	}
	spenders.Wait()
	close(quit)
	stop.Wait()
	total := rules.State(0)
	for k := range keys {
		r, _ := c.find(fmt.Sprint("key-", k))
		total += r.Load()
	}
	if total != g*rules.State(n) {
		t.Fatalf("the keys' states sum to %d after %d adds: adds lost or doubled across rebuilds", total, g*n)
	}
}
