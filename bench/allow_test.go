package bench

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/racetest"
	"github.com/keyrate/keyrate/internal/retries"
)

// BenchmarkAllow is the one driver: every subject on every workload, named
// store=<subject>/wl=<workload>, then the policy rows, named
// store=<store>/policy=<policy>/wl=<workload>, and the wait rows, named
// store=<store>/op=<op>/wl=<workload>, on their workloads; core
// counts come from -cpu, for every row alike (the testing package runs each
// sub-benchmark at every -cpu value: a row cannot choose its own).
func BenchmarkAllow(b *testing.B) {
	racetest.Bench()
	var leaves []leaf
	for _, sc := range subjects {
		for _, wl := range workloads {
			leaves = append(leaves, leaf{"store=" + sc.name + "/wl=" + wl.name, func(b *testing.B) {
				if wl.order == nil {
					benchChurn(b, sc, wl)
				} else {
					benchKnown(b, sc, wl)
				}
			}})
		}
	}
	for _, row := range policyRows {
		for _, name := range row.workloads {
			wl := workloadNamed(b, name)
			leaves = append(leaves, leaf{"store=" + row.name + "/wl=" + wl.name, func(b *testing.B) {
				benchKnown(b, row.subjectCase, wl)
			}})
		}
	}
	// A store's wait rows run one after the other on each workload, so
	// that the AllowN baseline runs next to what it is compared with.
	for rows := range slices.Chunk(waitRows, len(waitOps)) {
		for _, name := range waitWorkloads {
			wl := workloadNamed(b, name)
			for _, row := range rows {
				leaves = append(leaves, leaf{"store=" + row.name + "/wl=" + wl.name, func(b *testing.B) {
					benchWait(b, row, wl)
				}})
			}
		}
	}
	runLeaves(b, leaves)
}

// workloadNamed returns the workload named name.
func workloadNamed(b *testing.B, name string) workload {
	for _, wl := range workloads {
		if wl.name == name {
			return wl
		}
	}
	b.Fatalf("no workload named %q", name)
	return workload{}
}

// fixture is a subject prepared for a workload: every key inserted, with
// half its burst spent (see prefill).
type fixture struct {
	s       subject
	release func()
	in      *inputs
}

// current is the last fixture built, kept across the calls the testing
// package makes with growing b.N and for each -count and -cpu value (it
// runs them all for one sub-benchmark before the next), and across
// consecutive workloads with the same subject, limit and key set, so that
// a million keys are inserted once per sub-benchmark, not once per call.
// Only one is kept, so that the live heap (which every GC must mark)
// holds at most one prepared store. Reuse measures the same thing as a
// fresh fixture only while no key's bucket fills up (and so may be
// evicted) or empties: each workload's limit leaves every key far from
// both for longer than any run (see the limits), and checkReused fails a
// run after which the store holds other keys or has evicted any.
var current struct {
	id string
	f  *fixture
}

// fixtureFor returns the prepared subject for the running sub-benchmark,
// building it if the last one was for another. It asserts that the store
// holds exactly the keys the workload claims.
func fixtureFor(b *testing.B, sc subjectCase, wl workload) *fixture {
	in := inputsFor(b, wl)
	id := fmt.Sprintf("%s %v %d", sc.name, wl.limit, len(in.keys))
	if current.id == id {
		current.f.in = in
		return current.f
	}
	if current.f != nil {
		current.f.release()
		current.f = nil
	}
	s, release, err := sc.new(wl.limit)
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range in.keys {
		prefill(s, wl.limit, k)
	}
	if got := s.Len(); got != len(in.keys) {
		release()
		b.Fatalf("store=%s wl=%s: store holds %d keys after setup, want %d (%d claimed, capped at %d under -race)",
			sc.name, wl.name, got, len(in.keys), wl.keys, maxRaceKeys)
	}
	if sc.check != nil {
		if err := sc.check(s, in.keys); err != nil {
			release()
			b.Fatalf("store=%s wl=%s: %v", sc.name, wl.name, err)
		}
	}
	current.id, current.f = id, &fixture{s: s, release: release, in: in}
	runtime.GC() // collect setup's garbage now, not in the timed loop
	return current.f
}

// evictions returns the number of buckets s has evicted, or 0 if it is
// no keyrate.BoundedLimiter (a baseline).
func evictions(s subject) uint64 {
	if bl, ok := s.(keyrate.BoundedLimiter); ok {
		return bl.Stats().Evictions
	}
	return 0
}

// checkReused fails the run if, after it, the fixture's store holds
// another number of keys than setup put in, or has evicted a bucket since
// the run began (before is evictions at the start): a fixture kept across
// runs would then measure something else than a fresh one, new keys or
// re-inserted ones.
func checkReused(b *testing.B, name string, wl workload, f *fixture, before uint64) {
	if got := f.s.Len(); got != len(f.in.keys) {
		b.Fatalf("store=%s wl=%s: store holds %d keys after the run, want the %d setup inserted", name, wl.name, got, len(f.in.keys))
	}
	if n := evictions(f.s) - before; n != 0 {
		b.Fatalf("store=%s wl=%s: store evicted %d buckets during the run, want none", name, wl.name, n)
	}
}

// offsetStride spaces the goroutines' starting points in a sequence.
const offsetStride = 7919

// benchKnown runs a workload whose keys are all known to the store.
func benchKnown(b *testing.B, sc subjectCase, wl workload) {
	f := fixtureFor(b, sc, wl)
	s, seq, costs := f.s, f.in.seq, f.in.costs
	mask := len(seq) - 1
	var goroutines, allowed atomic.Int64
	evicted := evictions(s)
	retried := retries.Total()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(goroutines.Add(1)) * offsetStride
		n := int64(0)
		if costs == nil {
			for pb.Next() {
				if s.Allow(seq[i&mask]) {
					n++
				}
				i++
			}
		} else {
			for pb.Next() {
				if d, _ := s.AllowN(seq[i&mask], costs[i&mask]); d.Allowed {
					n++
				}
				i++
			}
		}
		allowed.Add(n)
	})
	b.StopTimer()
	checkReused(b, sc.name, wl, f, evicted)
	reportAllowed(b, sc, wl, allowed.Load())
	if strings.HasPrefix(sc.name, "atomic") {
		// atomicbucket's failed compare-and-swaps: the contention in its
		// cost (internal/retries).
		b.ReportMetric(float64(retries.Total()-retried)/float64(b.N), "retries/op")
	}
}

// churnChunk is how many fresh keys a goroutine claims at once in churn.
const churnChunk = 256

// benchChurn runs churn: a fresh store, and every call a key it has never
// seen. Goroutines claim chunks of a pre-generated key list.
func benchChurn(b *testing.B, sc subjectCase, wl workload) {
	keys := makeKeys("new-", b.N+churnChunk*(runtime.GOMAXPROCS(0)+1))
	s, release, err := sc.new(wl.limit)
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	var cursor, allowed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		n := int64(0)
		i, end := 0, 0
		for pb.Next() {
			if i == end {
				end = int(cursor.Add(churnChunk))
				i = end - churnChunk
			}
			if s.Allow(keys[i]) {
				n++
			}
			i++
		}
		allowed.Add(n)
	})
	b.StopTimer()
	if got := s.Len(); got != b.N {
		b.Fatalf("store=%s wl=churn: store holds %d keys after %d calls, want one per call", sc.name, got, b.N)
	}
	reportAllowed(b, sc, wl, allowed.Load())
}

// reportAllowed reports allowed/op and, for a limiter, checks it against
// what the workload is meant to do.
func reportAllowed(b *testing.B, sc subjectCase, wl workload, allowed int64) {
	frac := float64(allowed) / float64(b.N)
	b.ReportMetric(frac, "allowed/op")
	if !sc.limiter {
		return
	}
	if wl.allow && frac < 0.99 {
		b.Fatalf("store=%s wl=%s: allowed %d of %d calls; the workload is meant to allow them all", sc.name, wl.name, allowed, b.N)
	}
	if !wl.allow && frac > 0.01 {
		b.Fatalf("store=%s wl=%s: allowed %d of %d calls; the workload is meant to deny them all", sc.name, wl.name, allowed, b.N)
	}
}
