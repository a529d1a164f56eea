package flatmap

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/conformance"
	"github.com/keyrate/keyrate/internal/rules"
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
	seed  Seed
}

func newChecker(tb testing.TB, hashed bool) *checker {
	c := &checker{tb: tb, model: map[string]entry{}, seed: MakeSeed()}
	c.m.Init(&c.seed, hashed)
	return c
}

func (c *checker) hash(key string) uint64 { return c.seed.Hash(key) }

// insert adds key if the model lacks it.
func (c *checker) insert(key string, rs *rules.Rules, s []rules.State) {
	if _, ok := c.model[key]; ok {
		return
	}
	if !c.m.Insert(key, c.hash(key), rs, s) {
		c.tb.Fatalf("Insert(%q) failed", key)
	}
	c.model[key] = entry{rs, slices.Clone(s)}
}

// spend sets key's states, if held, to s (cut to its window count).
func (c *checker) spend(key string, s []rules.State) {
	i, ok := c.m.Find(key, c.hash(key))
	e, want := c.model[key]
	if ok != want {
		c.tb.Fatalf("Find(%q) = %v, model holds it: %v", key, ok, want)
	}
	if !ok {
		return
	}
	s = s[:e.rs.Len()]
	c.m.Store(i, s)
	copy(e.states, s)
}

// evict deletes key, if held.
func (c *checker) evict(key string) {
	i, ok := c.m.Find(key, c.hash(key))
	if !ok {
		return
	}
	c.m.Delete(i)
	delete(c.model, key)
}

// carry moves key, if held, to rs in states s.
func (c *checker) carry(key string, rs *rules.Rules, s []rules.State) {
	i, ok := c.m.Find(key, c.hash(key))
	if !ok {
		return
	}
	if !c.m.SetRules(i, rs, s) {
		c.tb.Fatalf("SetRules(%q) failed", key)
	}
	c.model[key] = entry{rs, slices.Clone(s)}
}

// check compares the whole map with the model, and checks the table's
// invariants: every key at its distance from home, the count, the dead
// bytes.
func (c *checker) check(absent ...string) {
	c.tb.Helper()
	m := &c.m
	if m.Len() != len(c.model) {
		c.tb.Fatalf("Len() = %d, model holds %d", m.Len(), len(c.model))
	}
	for key, e := range c.model {
		i, ok := m.Find(key, c.hash(key))
		if !ok {
			c.tb.Fatalf("Find(%q) missed a key the model holds", key)
		}
		if got := m.Rules(i); got != e.rs {
			c.tb.Fatalf("Rules(%q) = %s, want %s", key, got.Name(), e.rs.Name())
		}
		got := make([]rules.State, e.rs.Len())
		m.Load(i, got)
		if !slices.Equal(got, e.states) {
			c.tb.Fatalf("Load(%q) = %v, want %v", key, got, e.states)
		}
		// At rest, Seek reads what the lock's owner reads: the same slot,
		// window 0's state and policy, at the count Version returns.
		ver := m.Version()
		j, first, ok := m.SeekLong(key, c.hash(key), e.rs, ver)
		if !ok || j != m.At(i) || first != m.First(i) || ver&1 != 0 {
			c.tb.Fatalf("Seek(%q) at count %d = slot %v, state %d, %v; want slot %d, state %d, true (an even count)",
				key, ver, j, first, ok, i, m.First(i))
		}
		// FindUnder is Find and Rules in one: the same slot under the
		// key's policy, a miss under any other.
		if hit, ok := m.FindUnder(key, c.hash(key), e.rs); !ok || hit != m.At(i) {
			c.tb.Fatalf("FindUnder(%q, %s) = slot %v, %v; want slot %d, true", key, e.rs.Name(), hit, ok, i)
		}
		for _, other := range policies(c.tb) {
			if _, _, ok := m.SeekLong(key, c.hash(key), other, ver); ok && other != e.rs {
				c.tb.Fatalf("Seek(%q) under %s hit a key under %s", key, other.Name(), e.rs.Name())
			}
			if _, ok := m.FindUnder(key, c.hash(key), other); ok && other != e.rs {
				c.tb.Fatalf("FindUnder(%q) under %s hit a key under %s", key, other.Name(), e.rs.Name())
			}
		}
	}
	for _, key := range absent {
		if _, held := c.model[key]; !held {
			if _, ok := m.Find(key, c.hash(key)); ok {
				c.tb.Fatalf("Find(%q) hit a key the model lacks", key)
			}
			if _, _, ok := m.SeekLong(key, c.hash(key), policies(c.tb)[0], m.Version()); ok {
				c.tb.Fatalf("Seek(%q) hit a key the model lacks", key)
			}
			if _, ok := m.FindUnder(key, c.hash(key), policies(c.tb)[0]); ok {
				c.tb.Fatalf("FindUnder(%q) hit a key the model lacks", key)
			}
		}
	}
	used, live := 0, 0
	refs := make([]int, len(m.pols))
	for i, e := range m.slots {
		if e.ref == 0 {
			continue
		}
		used++
		live += m.recordLen(e.ref)
		refs[e.ref>>polShift&polMask]++
		h := m.hashAt(uint32(e.ref))
		if got, want := e.ref>>56-1, uint64((i-home(h, len(m.slots))+len(m.slots))%len(m.slots)); got != want {
			c.tb.Fatalf("slot %d: distance %d, want %d", i, got, want)
		}
		if uint64(e.ref>>tagShift&0xff) != tag(h) {
			c.tb.Fatalf("slot %d: tag %#x, want %#x", i, e.ref>>tagShift&0xff, tag(h))
		}
	}
	if used != m.n {
		c.tb.Fatalf("%d slots used, n = %d", used, m.n)
	}
	if live+m.dead != len(m.arena) {
		c.tb.Fatalf("live %d + dead %d bytes != arena %d", live, m.dead, len(m.arena))
	}
	for p, n := range refs {
		if m.pols[p].keys != n || (n == 0) != (m.pols[p].rs.Load() == nil) {
			c.tb.Fatalf("policy %d: counts %d keys, %d use it, policy %p", p, m.pols[p].keys, n, m.pols[p].rs.Load())
		}
	}
}

// checkKey compares key alone with the model, and the count.
func (c *checker) checkKey(key string) {
	c.tb.Helper()
	if c.m.Len() != len(c.model) {
		c.tb.Fatalf("Len() = %d, model holds %d", c.m.Len(), len(c.model))
	}
	i, ok := c.m.Find(key, c.hash(key))
	e, want := c.model[key]
	if ok != want {
		c.tb.Fatalf("Find(%q) = %v, model holds it: %v", key, ok, want)
	}
	if ok {
		got := make([]rules.State, e.rs.Len())
		c.m.Load(i, got)
		if c.m.Rules(i) != e.rs || !slices.Equal(got, e.states) {
			c.tb.Fatalf("key %q: %s %v, want %s %v", key, c.m.Rules(i).Name(), got, e.rs.Name(), e.states)
		}
	}
	// Seek agrees with Find at rest: a Seek that read a stale view (an
	// array reallocated without a new one published) would not.
	var j Hit
	var first rules.State
	var sought bool
	if ok {
		j, first, sought = c.m.SeekLong(key, c.hash(key), e.rs, c.m.Version())
	} else {
		_, _, sought = c.m.SeekLong(key, c.hash(key), policies(c.tb)[0], c.m.Version())
	}
	if sought != ok || ok && (j != c.m.At(i) || first != c.m.First(i)) {
		c.tb.Fatalf("Seek(%q) = slot %v, state %d, %v; Find: slot %d, %v", key, j, first, sought, i, ok)
	}
	// FindUnder hits the key's slot under its policy, and misses under
	// every other (and for a key the model lacks, under any).
	for _, rs := range policies(c.tb) {
		hit, found := c.m.FindUnder(key, c.hash(key), rs)
		if want := ok && rs == e.rs; found != want || found && hit != c.m.At(i) {
			c.tb.Fatalf("FindUnder(%q, %s) = slot %v, %v; want %v (Find: slot %d, %v)", key, rs.Name(), hit, found, want, i, ok)
		}
	}
}

// fuzzKey returns the key numbered k: lengths from 2 to past 127, where a
// key's length takes two bytes, with keys of 8 to 16 bytes (Find's word
// compare) among them.
func fuzzKey(k byte) string {
	n := []int{0, 1, 5, 10, 16, 130}[k%6]
	return fmt.Sprintf("%d:%s", k, strings.Repeat("x", n))
}

// maxOps is the most operations FuzzMap runs from one input.
const maxOps = 300

// FuzzMap runs random sequences of insertions, spends, evictions,
// policy changes (new records), tidying (shrinking) and bulk insertions
// (growth) on a Map and on a plain map, and checks after each that they
// hold the same keys in the same states (the key of each op after it,
// every key and the table's invariants every 32 ops and at the end).
// Evictions of many keys compact the arena.
func FuzzMap(f *testing.F) {
	f.Add(false, []byte{0, 1, 1, 2, 0, 3, 5, 7, 2, 9, 4, 0})
	f.Add(true, []byte{5, 0, 5, 1, 2, 3, 2, 4, 3, 5, 4, 1, 4, 0})
	f.Add(false, []byte{5, 1, 5, 2, 5, 3, 2, 0, 2, 1, 2, 2, 2, 3, 4, 0, 3, 7, 4, 1})
	pols := policies(f)
	f.Fuzz(func(t *testing.T, hashed bool, ops []byte) {
		if len(ops) > 2*maxOps { // each op checks the whole map: long inputs only slow the fuzzer
			ops = ops[:2*maxOps]
		}
		c := newChecker(t, hashed)
		var s [keyrate.MaxLimits]rules.State
		for j := 0; j+1 < len(ops); j += 2 {
			op, arg := ops[j], ops[j+1]
			key := fuzzKey(arg)
			rs := pols[int(arg>>5)%len(pols)]
			for w := range s {
				s[w] = rules.State(uint64(arg)<<8 | uint64(j+w))
			}
			switch op % 6 {
			case 0:
				c.insert(key, rs, s[:rs.Len()])
			case 1:
				c.spend(key, s[:])
			case 2:
				c.evict(key)
			case 3:
				c.carry(key, rs, s[:rs.Len()])
			case 4:
				c.m.Tidy()
			case 5: // enough keys to grow the table, some of them long
				for k := range int(arg%64) + 1 {
					c.insert(fuzzKey(byte(k*7+int(arg))), rs, s[:rs.Len()])
				}
			}
			if j%64 == 62 { // every 32 ops: the whole map and its invariants
				c.check(key)
			} else {
				c.checkKey(key)
			}
		}
		for key := range c.model { // evict all: compaction, then Tidy frees
			c.evict(key)
		}
		c.check()
		c.m.Tidy()
		if c.m.slots != nil || c.m.arena != nil {
			t.Fatalf("an empty map after Tidy holds %d slots and %d arena bytes", len(c.m.slots), cap(c.m.arena))
		}
	})
}

// TestCompaction checks that evicting most keys compacts the arena and
// that Tidy shrinks the slots, with every remaining key intact.
func TestCompaction(t *testing.T) {
	pols := policies(t)
	c := newChecker(t, false)
	for i := range 4096 {
		rs := pols[i%3]
		s := []rules.State{1, 2, 3}[:rs.Len()]
		c.insert(fmt.Sprintf("key-%06d", i), rs, s)
	}
	arena, slots := cap(c.m.arena), len(c.m.slots)
	for i := range 4096 {
		if i%16 != 0 {
			c.evict(fmt.Sprintf("key-%06d", i))
		}
	}
	c.check()
	if c.m.dead*4 > len(c.m.arena) || cap(c.m.arena) > arena/4 {
		t.Errorf("after evicting 15/16 of the keys: arena %d bytes (cap %d, was %d), %d dead; want compacted", len(c.m.arena), cap(c.m.arena), arena, c.m.dead)
	}
	gen := c.m.Gen()
	if !c.m.Tidy() || c.m.Gen() == gen || len(c.m.slots) > slots/8 {
		t.Errorf("Tidy left %d slots of %d for %d keys", len(c.m.slots), slots, c.m.Len())
	}
	c.check()
}

// TestFarFromHome inserts hashed keys whose hashes' low 32 bits differ
// only from bit 16 up, so that until the table has tens of thousands of
// slots hundreds of keys share a few home slots and some key would sit
// more than 254 slots from its home: the table must grow past its load
// factor until none does, keeping every key.
func TestFarFromHome(t *testing.T) {
	pols := policies(t)
	var m Map
	seed := MakeSeed()
	m.Init(&seed, true)
	s := []rules.State{7}
	const keys = 600
	for i := range keys {
		if !m.Insert("", uint64(i)<<16|uint64(i)<<40, pols[0], s) {
			t.Fatalf("Insert %d failed", i)
		}
	}
	if len(m.slots) < 1<<14 {
		t.Fatalf("%d keys in %d slots: the table never grew for distance", keys, len(m.slots))
	}
	for i := range keys {
		h := uint64(i)<<16 | uint64(i)<<40
		j, ok := m.Find("", h)
		if !ok || m.First(j) != 7 || binary.LittleEndian.Uint64(m.arena[uint32(m.slots[j].ref):]) != h {
			t.Fatalf("key %d lost after growth (found %v)", i, ok)
		}
		if d := m.slots[j].ref >> 56; d > maxDist1 {
			t.Fatalf("key %d sits %d slots from home", i, d-1)
		}
	}
}

// TestSameProbe checks Find on keys that share their home slot and tag,
// so that each probe meets candidates whose records differ from the key
// in one byte (the middle byte of a 16-byte key, and its last; a key of
// another length with the same bytes): every key is found in its own
// slot, and a key never inserted that differs in one byte is not.
func TestSameProbe(t *testing.T) {
	pols := policies(t)
	seed := Seed{1, 2, 3, 4}
	var m Map
	m.Init(&seed, false)
	// Keys whose hashes have tag 0x5a and home slot 0 in the first table
	// (8 slots): 6 of them, so the table does not grow.
	var keys []string
	for i := 0; len(keys) < 6; i++ {
		for _, k := range []string{fmt.Sprintf("same-probe-%05d", i), fmt.Sprintf("same-probe-%04d", i)} {
			if h := seed.Hash(k); tag(h) == 0x5a && home(h, minSlots) == 0 {
				keys = append(keys, k)
			}
		}
	}
	for j, k := range keys {
		if !m.Insert(k, seed.Hash(k), pols[0], []rules.State{rules.State(j + 1)}) {
			t.Fatalf("Insert(%q) failed", k)
		}
	}
	if len(m.slots) != minSlots {
		t.Fatalf("table grew to %d slots: the keys no longer share a probe", len(m.slots))
	}
	for j, k := range keys {
		i, ok := m.Find(k, seed.Hash(k))
		if !ok || m.First(i) != rules.State(j+1) {
			t.Errorf("Find(%q) = slot %d (%v) holding %d, want the key's own, %d", k, i, ok, m.First(i), j+1)
		}
		// The same hash, another key: one byte changed, or a byte cut.
		for _, other := range []string{k[:len(k)/2] + "#" + k[len(k)/2+1:], k[:len(k)-1] + "#", k[:len(k)-1]} {
			if i, ok := m.Find(other, seed.Hash(k)); ok {
				t.Errorf("Find(%q) with %q's hash hit slot %d", other, k, i)
			}
		}
	}
}

// TestKnownKeyAllocs checks that finding a known key and spending from it
// allocate nothing.
func TestKnownKeyAllocs(t *testing.T) {
	pols := policies(t)
	c := newChecker(t, false)
	for i := range 100 {
		c.insert(fmt.Sprint("k", i), pols[1], []rules.State{1, 2})
	}
	key := "k42"
	h := c.hash(key)
	var s [2]rules.State
	if n := testing.AllocsPerRun(100, func() {
		i, ok := c.m.Find(key, h)
		if !ok {
			t.Fatal("k42 missing")
		}
		c.m.Load(i, s[:])
		s[1]++
		c.m.Store(i, s[:])
		c.m.SetFirst(i, c.m.First(i)+1)
	}); n != 0 {
		t.Errorf("a known key's find and spend: %v allocations, want 0", n)
	}
}

// TestLogs checks that keys under a SlidingLog policy keep their own log
// through growth, deletions of other keys (compaction), and moves to and
// from other policies: each key's log is the one made for it, and a key
// moved off a log policy keeps none.
func TestLogs(t *testing.T) {
	pols := policies(t)
	logPol, err := rules.NewRules(keyrate.Policy{Name: "log", Limits: []keyrate.Limit{
		keyrate.Limit{Rate: 4, Per: time.Second, Burst: 4}.Using(keyrate.SlidingLog)}}, clock.NewManual(0))
	if err != nil {
		t.Fatal(err)
	}
	if !logPol.IsLog() {
		t.Fatal("the log policy is not a log")
	}
	seed := MakeSeed()
	var m Map
	m.Init(&seed, false)
	logs := map[string]*rules.Log{}
	find := func(key string) int {
		t.Helper()
		i, ok := m.Find(key, seed.Hash(key))
		if !ok {
			t.Fatalf("key %q missing", key)
		}
		return i
	}
	s := make([]rules.State, rules.LogWords)
	for k := range 3000 {
		key := fmt.Sprintf("key-%d-%s", k, strings.Repeat("y", k%20))
		rs := pols[k%3]
		if k%2 == 0 {
			rs = logPol
		}
		if !m.Insert(key, seed.Hash(key), rs, s[:rs.Len()]) {
			t.Fatal("Insert failed")
		}
		if rs == logPol {
			logs[key] = m.Log(find(key))
		}
	}
	for k := range 3000 {
		key := fmt.Sprintf("key-%d-%s", k, strings.Repeat("y", k%20))
		switch k % 5 {
		case 0, 1, 2: // deletions: compaction
			m.Delete(find(key))
			delete(logs, key)
		case 3: // off a log policy, or onto one
			i := find(key)
			if m.Rules(i) == logPol {
				if !m.SetRules(i, pols[2], s[:3]) || m.Log(find(key)) != nil {
					t.Fatalf("%q moved off the log policy keeps a log", key)
				}
				delete(logs, key)
			} else {
				if !m.SetRules(i, logPol, s[:rules.LogWords]) {
					t.Fatal("SetRules failed")
				}
				logs[key] = m.Log(find(key))
			}
		}
	}
	seen := map[*rules.Log]bool{}
	for key, l := range logs {
		got := m.Log(find(key))
		if got == nil || got != l || seen[got] {
			t.Fatalf("key %q: log %p, want its own %p", key, got, l)
		}
		seen[got] = true
	}
	m.Tidy()
	if n := len(m.logs.logs) - len(m.logs.free); n != len(logs) {
		t.Fatalf("log table holds %d logs, want %d", n, len(logs))
	}
}
