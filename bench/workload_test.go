package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/racetest"
)

// Limits the workloads run under. The stores evict a key whose bucket is
// full, since it is indistinguishable from a new one; setup therefore
// spends half of every key's burst (see prefill), so that no known key is
// full, and so evicted, during a run.
var (
	// open is one token per nanosecond with a burst of a trillion (1000s
	// to fill): after setup has spent half of it, every request in a run is
	// allowed.
	open = keyrate.Limit{Rate: 1_000_000_000, Per: time.Second, Burst: 1_000_000_000_000}
	// shut is one token an hour: once setup has spent it, every request in
	// the run is denied.
	shut = keyrate.Every(time.Hour)
	// idle is for uniform-1M-idle, the common gateway case of clients far
	// under their limits: a token a nanosecond, a burst of a million, so
	// that a bucket is full again within a millisecond of any call
	// (setup's spend of half the burst) and a nanosecond after a spend of
	// one. Only a store that evicts a bucket the moment it is full churns
	// on it (see keyrate.WithEvictionGrace).
	idle = keyrate.Limit{Rate: 1_000_000_000, Per: time.Second, Burst: 1_000_000}
	// sticky is for churn: a new key is allowed, and its bucket then stays
	// short of full for an hour, so that no store evicts it during the run
	// and every store does the same work, inserting one key per call.
	sticky = keyrate.Every(time.Hour).WithBurst(1_000)
)

// prefill makes key known to s with half its bucket spent (all of it when
// the burst is 1), so that it is not full during the run.
func prefill(s subject, l keyrate.Limit, key string) {
	s.AllowN(key, max(1, l.Burst/2))
}

// maxRaceKeys caps a workload's distinct keys under the race detector,
// where inserting a million keys per store would take minutes.
const maxRaceKeys = 4096

// maxKeys returns the distinct keys a workload that claims n uses: n, or
// maxRaceKeys when the race detector is on and n is larger.
func maxKeys(n int) int {
	if racetest.Enabled {
		return min(n, maxRaceKeys)
	}
	return n
}

// A workload is one wl= value: the limit, the keys and the calls.
type workload struct {
	name  string
	limit keyrate.Limit
	// keys is the number of distinct keys the name claims (before
	// maxKeys); every one is inserted in setup. Zero for churn.
	keys int
	// order returns the sequence of key indexes the goroutines walk, of a
	// power-of-two length; nil for churn.
	order func(r *rand.Rand, keys int) []int
	// sparse says the order need not use every key (Zipf draws); setup
	// still inserts them all.
	sparse bool
	// costs, if set, makes the workload call AllowN with these costs
	// (walked in step with the keys) instead of Allow.
	costs func(r *rand.Rand, length int) []int
	// allow says whether the run should be allowed (at least 99%) or
	// denied (at most 1%).
	allow bool
}

// workloads is every wl= value, in report order: makeWorkloads of the
// -largekeys flag, set by TestMain once the flags are parsed.
var workloads = makeWorkloads(defaultLargeKeys)

// makeWorkloads returns every workload, with large distinct keys in the
// large ones (uniform-<large>, uniform-<large>-idle, zipf-<large>), whose
// names say the count: uniform-1M for the default, uniform-100k for
// make report's quick set.
func makeWorkloads(large int) []workload {
	n := countName(large)
	return []workload{
		{name: "hotkey", limit: open, keys: 1, order: shuffled, allow: true},
		{name: "hotkey-deny", limit: shut, keys: 1, order: shuffled, allow: false},
		{name: "uniform-1k", limit: open, keys: 1_000, order: shuffled, allow: true},
		{name: "uniform-" + n, limit: open, keys: large, order: shuffled, allow: true},
		{name: "uniform-" + n + "-idle", limit: idle, keys: large, order: shuffled, allow: true},
		{name: "zipf-" + n, limit: open, keys: large, order: zipf, sparse: true, allow: true},
		{name: "churn", limit: sticky, allow: true},
		{name: "cost-mix", limit: open, keys: 1_000, order: shuffled, costs: costs1to8, allow: true},
	}
}

// countName names a key count as the workload names do: 1M, 100k, 1k, or
// the number itself when it is no whole number of thousands.
func countName(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1_000 && n%1_000 == 0:
		return strconv.Itoa(n/1_000) + "k"
	}
	return strconv.Itoa(n)
}

// parseCount reads a key count as countName writes it (1M, 100k) or as a
// plain number.
func parseCount(s string) (int, error) {
	digits, mult := s, 1
	switch {
	case strings.HasSuffix(s, "M"):
		digits, mult = strings.TrimSuffix(s, "M"), 1_000_000
	case strings.HasSuffix(s, "k"):
		digits, mult = strings.TrimSuffix(s, "k"), 1_000
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || n > math.MaxInt/mult {
		return 0, fmt.Errorf("want a positive key count such as 1M, 100k or 5000, got %q", s)
	}
	return n * mult, nil
}

// minSequence is the shortest key sequence: long enough that goroutines
// starting at different offsets do not walk in lockstep.
const minSequence = 1 << 16

// sequenceLen returns the power of two at least max(keys, minSequence).
func sequenceLen(keys int) int {
	n := minSequence
	for n < keys {
		n <<= 1
	}
	return n
}

// shuffled is a sequence of shuffled rounds of every key: each key appears
// equally often (give or take one), in random order.
func shuffled(r *rand.Rand, keys int) []int {
	seq := make([]int, 0, sequenceLen(keys)+keys)
	for len(seq) < cap(seq)-keys {
		round := r.Perm(keys)
		seq = append(seq, round...)
	}
	return seq[:sequenceLen(keys)]
}

// zipf is a sequence drawn from a Zipf distribution with s = 1.1 over the
// keys: key 0 is the most frequent.
func zipf(r *rand.Rand, keys int) []int {
	z := rand.NewZipf(r, 1.1, 1, uint64(keys-1))
	seq := make([]int, sequenceLen(keys))
	for i := range seq {
		seq[i] = int(z.Uint64())
	}
	return seq
}

// costs1to8 is a sequence of costs drawn uniformly from 1 to 8.
func costs1to8(r *rand.Rand, length int) []int {
	c := make([]int, length)
	for i := range c {
		c[i] = 1 + r.IntN(8)
	}
	return c
}

// keyLen is the length of every benchmark key.
const keyLen = 16

// makeKeys returns n distinct keys of keyLen bytes, prefix (4 bytes) and a
// zero-padded number, as slices of one allocation.
func makeKeys(prefix string, n int) []string {
	if len(prefix) != 4 {
		panic("bench: key prefix must be 4 bytes")
	}
	blob := make([]byte, 0, n*keyLen)
	for i := range n {
		blob = appendKey(blob, prefix, i)
	}
	s := string(blob) // one copy, then slices of it
	keys := make([]string, n)
	for i := range keys {
		keys[i] = s[i*keyLen : (i+1)*keyLen]
	}
	return keys
}

// appendKey appends the keyLen-byte key prefix+i to b.
func appendKey(b []byte, prefix string, i int) []byte {
	b = append(b, prefix...)
	d := strconv.AppendInt(nil, int64(i), 10)
	for range keyLen - len(prefix) - len(d) {
		b = append(b, '0')
	}
	return append(b, d...)
}

// inputs is a workload's pre-generated calls: the key for each step and,
// for cost-mix, the cost.
type inputs struct {
	keys  []string // distinct keys, all inserted in setup
	seq   []string // keys in call order; power-of-two length
	costs []int    // nil, or costs in call order, len(seq)
}

// inputCache holds each workload's inputs, generated once per process:
// every store and core count walks the same sequence.
var inputCache = map[string]*inputs{}

// keySets holds the distinct keys by their number, shared by the workloads
// that use as many: uniform-1M and zipf-1M walk the same million keys.
var keySets = map[int][]string{}

// keysOf returns n distinct keys, generated once per process.
func keysOf(n int) []string {
	if keys, ok := keySets[n]; ok {
		return keys
	}
	keys := makeKeys("key-", n)
	keySets[n] = keys
	return keys
}

// inputsFor returns wl's inputs, generating and checking them on first use:
// the sequence must use exactly the claimed number of distinct keys (at
// most, for zipf), and its length must be a power of two.
func inputsFor(b *testing.B, wl workload) *inputs {
	if in, ok := inputCache[wl.name]; ok {
		return in
	}
	r := rand.New(rand.NewPCG(uint64(len(wl.name)), 0x6b657972617465))
	n := maxKeys(wl.keys)
	in := &inputs{keys: keysOf(n)}
	order := wl.order(r, n)
	seen := make([]bool, n)
	distinct := 0
	in.seq = make([]string, len(order))
	for i, k := range order {
		if !seen[k] {
			seen[k] = true
			distinct++
		}
		in.seq[i] = in.keys[k]
	}
	if len(in.seq)&(len(in.seq)-1) != 0 {
		b.Fatalf("wl=%s: sequence length %d is not a power of two", wl.name, len(in.seq))
	}
	wantDistinct := fmt.Sprintf("%d (the %d keys the name claims, capped at %d under -race)", n, wl.keys, maxRaceKeys)
	if wl.order == nil || distinct > n || (distinct != n && !wl.sparse) {
		b.Fatalf("wl=%s: sequence uses %d distinct keys, want %s", wl.name, distinct, wantDistinct)
	}
	if wl.costs != nil {
		in.costs = wl.costs(r, len(in.seq))
	}
	inputCache[wl.name] = in
	return in
}
