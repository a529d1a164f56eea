package exportertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/eventmetrics"
)

// testCounts feeds one event of each kind: every event lands in its own
// series and nowhere else. A failure policy's denial that comes with an
// error (redisbucket's FailClosed) is a degraded decision too; a caller's
// context ending is not a backend failure, nor is a call the policy's
// algorithm does not support.
func testCounts(t *testing.T, e Exporter) {
	m := e.New(t)
	for _, ev := range []keyrate.Event{
		{Key: "a", Policy: "free", Cost: 1, Allowed: true},
		{Key: "a", Policy: "free", Cost: 3, Allowed: true},
		{Key: "a", Policy: "free", Cost: 1},
		{Key: "b", Policy: "pro", Cost: 1, Shadow: true},
		{Key: "c", Policy: "pro", Cost: 2, Allowed: true, Degraded: true},
		{Key: "c", Policy: "pro", Cost: 1, Degraded: true},
		{Key: "d", Policy: "free", Cost: 1, Err: fmt.Errorf("wrapped: %w", keyrate.ErrStoreFull)},
		{Key: "d", Policy: "gold", Cost: 1, Err: keyrate.ErrUnknownPolicy},
		{Key: "d", Policy: "free", Cost: 0, Err: keyrate.ErrInvalidCost},
		{Key: "d", Policy: "free", Cost: 99, Err: keyrate.ErrCostExceedsBurst},
		{Key: "", Policy: "free", Cost: 1, Err: keyrate.ErrInvalidKey},
		{Key: "e", Policy: "free", Cost: 1, Err: errors.New("dial tcp: connection refused")},
		{Key: "f", Policy: "free", Cost: 1, Degraded: true, Err: errors.New("redisbucket: redis unavailable")},
		{Key: "g", Policy: "free", Cost: 1, Err: fmt.Errorf("redisbucket: %w", context.Canceled)},
		{Key: "g", Policy: "free", Cost: 1, Err: context.DeadlineExceeded},
		{Key: "h", Policy: "free", Cost: 1, Err: fmt.Errorf("%w: policy %q counts with %v", keyrate.ErrUnsupportedAlgorithm, "free", keyrate.SlidingLog)},
	} {
		m.Observe(ev)
	}
	equal(t, m.Collect(), with(policySeries("free", "pro", "gold"), Snapshot{
		{Name: Decisions, Policy: "free", Decision: "allowed"}:  2,
		{Name: Decisions, Policy: "free", Decision: "denied"}:   1,
		{Name: Decisions, Policy: "pro", Decision: "allowed"}:   1,
		{Name: Decisions, Policy: "pro", Decision: "denied"}:    2,
		{Name: CostAllowed, Policy: "free"}:                     4,
		{Name: CostAllowed, Policy: "pro"}:                      2,
		{Name: ShadowDenied, Policy: "pro"}:                     1,
		{Name: Degraded, Policy: "pro", Decision: "allowed"}:    1,
		{Name: Degraded, Policy: "pro", Decision: "denied"}:     1,
		{Name: Degraded, Policy: "free", Decision: "denied"}:    1, // FailClosed: degraded, and an error
		{Name: Errors, Policy: "free", Error: "store_full"}:     1,
		{Name: Errors, Policy: "gold", Error: "unknown_policy"}: 1,
		{Name: Errors, Policy: "free", Error: "invalid_cost"}:   2,
		{Name: Errors, Policy: "free", Error: "invalid_key"}:    1,
		{Name: Errors, Policy: "free", Error: "backend"}:        2, // only the Redis failures
		{Name: Errors, Policy: "free", Error: "canceled"}:       2,
		{Name: Errors, Policy: "free", Error: "unsupported"}:    1,
	}), "one event of each kind")
}

// testOddEvents: events no store sends — an empty policy, a negative
// cost, an allowed event carrying an error — are counted without a panic
// and without an invalid series: an error wins over Allowed, and a cost
// below 1 adds nothing to the cost allowed.
func testOddEvents(t *testing.T, e Exporter) {
	m := e.New(t)
	m.Observe(keyrate.Event{})
	m.Observe(keyrate.Event{Policy: "p", Cost: -5, Allowed: true})
	m.Observe(keyrate.Event{Policy: "p", Cost: 1, Allowed: true, Err: errors.New("boom")})
	equal(t, m.Collect(), with(policySeries("", "p"), Snapshot{
		{Name: Decisions, Policy: "", Decision: "denied"}:   1,
		{Name: Decisions, Policy: "p", Decision: "allowed"}: 1,
		{Name: Errors, Policy: "p", Error: "backend"}:       1,
	}), "odd events")
}

// testStoreSequence: a known sequence of calls on a real atomicbucket
// store with a manual clock, every series after it.
func testStoreSequence(t *testing.T, e Exporter) {
	m := e.New(t)
	clk := clock.NewManual(0)
	store := keyTierStore(t, m, keyrate.PerMinute(2), keyrate.WithClock(clk), keyrate.WithMaxKeys(2),
		keyrate.WithPolicies(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerMinute(5)}}))
	if err := m.Watch(store); err != nil {
		t.Fatal(err)
	}
	equal(t, m.Collect(), watched(0, 0, 0), "a new store, watched")

	type step struct {
		key     string
		cost    int
		allowed bool
		err     error
	}
	run := func(i int, s step) {
		t.Helper()
		d, err := store.AllowN(s.key, s.cost)
		if !errors.Is(err, s.err) || (s.err == nil && err != nil) || d.Allowed != s.allowed {
			t.Fatalf("step %d: AllowN(%q, %d) = %v, %v; want allowed %v, error %v", i, s.key, s.cost, d.Allowed, err, s.allowed, s.err)
		}
	}
	steps := []step{
		{":alice", 1, true, nil}, // the default policy: 2 a minute
		{":alice", 1, true, nil},
		{":alice", 1, false, nil},
		{"pro:bob", 3, true, nil}, // 5 a minute
		{"pro:bob", 3, false, nil},
		{":carol", 1, false, keyrate.ErrStoreFull}, // 2 keys tracked, neither full
		{":alice", 3, false, keyrate.ErrCostExceedsBurst},
		{"gold:dave", 1, false, keyrate.ErrUnknownPolicy},
	}
	for i, s := range steps {
		run(i, s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := store.Wait(ctx, ":alice", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context = %v, want context.Canceled", err)
	}
	// A minute on, both buckets are full again: a sweep evicts them, and
	// carol gets in.
	clk.Advance(time.Minute)
	if n := store.Sweep(); n != 2 {
		t.Fatalf("Sweep() = %d, want 2", n)
	}
	run(len(steps), step{":carol", 1, true, nil})

	equal(t, m.Collect(), with(policySeries(keyrate.DefaultPolicy, "pro", "gold"), Snapshot{
		{Name: Decisions, Policy: keyrate.DefaultPolicy, Decision: "allowed"}: 3,
		{Name: Decisions, Policy: keyrate.DefaultPolicy, Decision: "denied"}:  1,
		{Name: Decisions, Policy: "pro", Decision: "allowed"}:                 1,
		{Name: Decisions, Policy: "pro", Decision: "denied"}:                  1,
		{Name: CostAllowed, Policy: keyrate.DefaultPolicy}:                    3,
		{Name: CostAllowed, Policy: "pro"}:                                    3,
		{Name: Errors, Policy: keyrate.DefaultPolicy, Error: "store_full"}:    1,
		{Name: Errors, Policy: keyrate.DefaultPolicy, Error: "invalid_cost"}:  1,
		{Name: Errors, Policy: keyrate.DefaultPolicy, Error: "canceled"}:      1,
		{Name: Errors, Policy: "gold", Error: "unknown_policy"}:               1,
		{Name: Keys}:      1,
		{Name: Evictions}: 2,
		{Name: Refused}:   1,
	}), "after the sequence")
}

// testPolicyBounded: a client that names its own tiers cannot grow the
// series past MaxUnknownPolicies policy label values for names the store
// lacks, nor past MaxPolicies with the names it has.
func testPolicyBounded(t *testing.T, e Exporter) {
	m := e.New(t)
	for i := range eventmetrics.MaxPolicies + 100 {
		m.Observe(keyrate.Event{Policy: fmt.Sprint("tier-", i), Cost: 1, Err: keyrate.ErrUnknownPolicy})
	}
	s := m.Collect()
	if n := len(policies(s)); n != eventmetrics.MaxUnknownPolicies+1 {
		t.Errorf("%d policy label values for names the store lacks, want MaxUnknownPolicies and other", n)
	}
	if got, want := s[Series{Name: Errors, Policy: eventmetrics.Other, Error: "unknown_policy"}], float64(eventmetrics.MaxPolicies+100-eventmetrics.MaxUnknownPolicies); got != want {
		t.Errorf("errors under other = %v, want %v", got, want)
	}
	for i := range eventmetrics.MaxPolicies {
		m.Observe(keyrate.Event{Policy: fmt.Sprint("known-", i), Cost: 1, Allowed: true})
	}
	s = m.Collect()
	if n := len(policies(s)); n != eventmetrics.MaxPolicies+1 {
		t.Errorf("%d policy label values, want MaxPolicies and other: names the store has take the rest", n)
	}
	if got := s[Series{Name: Decisions, Policy: eventmetrics.Other, Decision: "allowed"}]; got != eventmetrics.MaxUnknownPolicies {
		t.Errorf("known names' decisions under other = %v, want MaxUnknownPolicies", got)
	}
}

// testUnknownNamesCannotCrowdOut: a client whose key names its tier (a
// store's WithPolicyFunc) and that sends MaxPolicies made-up names before
// the store's own policies are first used (after a restart, say: 64
// requests) does not push those policies into other: the made-up names,
// which the store answers with ErrUnknownPolicy, take at most
// MaxUnknownPolicies of the MaxPolicies labels.
func testUnknownNamesCannotCrowdOut(t *testing.T, e Exporter) {
	m := e.New(t)
	store := keyTierStore(t, m, keyrate.PerMinute(10), keyrate.WithPolicies(keyrate.Policy{Name: "pro", Limits: []keyrate.Limit{keyrate.PerMinute(100)}}))
	for i := range eventmetrics.MaxPolicies {
		if _, err := store.AllowN(fmt.Sprintf("made-up-%d:mallory", i), 1); !errors.Is(err, keyrate.ErrUnknownPolicy) {
			t.Fatalf("made-up name %d: %v, want ErrUnknownPolicy", i, err)
		}
	}
	if !store.Allow("pro:alice") || !store.Allow(":bob") { // pro, and the default policy
		t.Fatal("the store's own policies denied a first request")
	}
	s := m.Collect()
	for policy, want := range map[string]float64{"pro": 1, keyrate.DefaultPolicy: 1, eventmetrics.Other: 0} {
		if got := s[Series{Name: Decisions, Policy: policy, Decision: "allowed"}]; got != want {
			t.Errorf("allowed under %q = %v, want %v", policy, got, want)
		}
	}
}

// testPolicyLength: policy label values are bounded in length
// (MaxPolicyLabel) as well as in number: a store whose WithPolicyFunc
// takes a client's key apart hands Observe names as long as the client's
// key (a header of up to 1 MiB), and every series of the policy (13)
// would carry the name in each export: unbounded, 32 requests with 1 MiB
// keys would make every scrape about 400 MiB of text.
func testPolicyLength(t *testing.T, e Exporter) {
	m := e.New(t)
	store := keyTierStore(t, m, keyrate.PerMinute(10))
	long := strings.Repeat("t", 1<<20)
	for i := range 4 {
		if _, err := store.AllowN(fmt.Sprint(i, long, ":mallory"), 1); !errors.Is(err, keyrate.ErrUnknownPolicy) {
			t.Fatalf("AllowN: %v, want ErrUnknownPolicy", err)
		}
	}
	names := policies(m.Collect())
	if len(names) != 4 {
		t.Fatalf("%d policy label values, want 4", len(names))
	}
	for name := range names {
		if len(name) != eventmetrics.MaxPolicyLabel || !strings.HasSuffix(name, "...") {
			t.Errorf("policy label of %d bytes, ending %q: want MaxPolicyLabel, ending ...", len(name), name[max(0, len(name)-5):])
		}
	}
}

// testPolicyNotUTF8: a policy name that is not valid UTF-8 reaches
// Observe from a store whose WithPolicyFunc derives the name from a
// client's key, and neither Prometheus nor OTLP takes such a string.
// Observe, and so the store's AllowN on the request path, does not panic:
// the event is counted under the name with U+FFFD for the bad byte.
func testPolicyNotUTF8(t *testing.T, e Exporter) {
	m := e.New(t)
	store := keyTierStore(t, m, keyrate.PerMinute(1))
	var (
		d        keyrate.Decision
		err      error
		panicked any
	)
	func() {
		defer func() { panicked = recover() }()
		d, err = store.AllowN("\xff:alice", 1) // a client's key, such as a header value
	}()
	if panicked != nil {
		t.Fatalf("AllowN panicked in the observer: %v", panicked)
	}
	if !errors.Is(err, keyrate.ErrUnknownPolicy) || d.Allowed {
		t.Fatalf("AllowN = %v, %v; want denied, ErrUnknownPolicy", d.Allowed, err)
	}
	equal(t, m.Collect(), with(policySeries("\uFFFD"), Snapshot{
		{Name: Errors, Policy: "\uFFFD", Error: "unknown_policy"}: 1,
	}), "a name not UTF-8")
	for name := range policies(m.Collect()) {
		if !utf8.ValidString(name) {
			t.Errorf("policy label %q is not UTF-8", name)
		}
	}
}

// testWatch: the store's Stats are read at each export, its counts from
// the Watch call on; a typed nil is refused rather than left to panic at
// the export, and with no store watched there are none of its series.
func testWatch(t *testing.T, e Exporter) {
	m := e.New(t)
	equal(t, m.Collect(), Snapshot{}, "no store watched")
	s := &stats{Keys: 7, Evictions: 3, Refused: 2}
	if err := m.Watch(s); err != nil {
		t.Fatal(err)
	}
	equal(t, m.Collect(), watched(7, 0, 0), "what the store did before it was watched is not counted")
	s.Keys, s.Evictions, s.Refused = 9, 8, 3
	equal(t, m.Collect(), watched(9, 5, 1), "after the store counted more")

	var typedNil *stats
	if err := m.Watch(typedNil); err == nil || !strings.Contains(err.Error(), "Watch: a nil *exportertest.stats") {
		t.Errorf("Watch(typed nil) = %v, want an error naming its type", err)
	}
	equal(t, m.Collect(), watched(9, 5, 1), "a refused Watch changes nothing")
	if err := m.Watch(nil); err != nil {
		t.Fatal(err)
	}
	equal(t, m.Collect(), Snapshot{}, "Watch(nil) stops watching")
}

// testWatchSwitch: when Watch replaces the store (a reloaded
// configuration builds a new one), the evictions and refusals go on from
// where they were: the old store's counts, read once more at the switch,
// stay in them, the new store's add to them from then, and a store
// watched again is not counted twice. Reporting the watched store's own
// Stats, they went from 10 evictions down to 1 at the switch, which a
// backend reads as a counter reset.
func testWatchSwitch(t *testing.T, e Exporter) {
	m := e.New(t)
	watch := func(s eventmetrics.Stater) {
		t.Helper()
		if err := m.Watch(s); err != nil {
			t.Fatal(err)
		}
	}
	old := &stats{}
	watch(old)
	old.Keys, old.Evictions, old.Refused = 4, 9, 2
	equal(t, m.Collect(), watched(4, 9, 2), "the first store")
	old.Evictions = 10 // after the last export: still counted, at the switch
	fresh := &stats{Keys: 1}
	watch(fresh)
	fresh.Evictions = 1
	equal(t, m.Collect(), watched(1, 11, 2), "the old store's counts carry over; the new one's add to them")
	watch(fresh)
	equal(t, m.Collect(), watched(1, 11, 2), "watching the same store again counts nothing twice")
	watch(nil)
	equal(t, m.Collect(), Snapshot{}, "no store watched: no series")
	fresh.Evictions, fresh.Refused = 5, 1 // while not watched: not counted
	watch(fresh)
	fresh.Evictions = 7
	equal(t, m.Collect(), watched(1, 13, 2), "a store watched again adds from the new Watch on")
}

// testWatchStores: Watch of real stores, and of a nil *atomicbucket.Store,
// which is refused and changes nothing.
func testWatchStores(t *testing.T, e Exporter) {
	m := e.New(t)
	newStore := func() *atomicbucket.Store {
		s, err := atomicbucket.New(keyrate.PerSecond(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := newStore(), newStore()
	a.Allow("x")
	b.Allow("x")
	b.Allow("y")
	if err := m.Watch(a); err != nil {
		t.Fatal(err)
	}
	var nilStore *atomicbucket.Store
	if err := m.Watch(nilStore); err == nil {
		t.Error("Watch(nil *atomicbucket.Store) = nil, want an error")
	}
	equal(t, m.Collect(), watched(1, 0, 0), "a's one key")
	if err := m.Watch(b); err != nil {
		t.Fatal(err)
	}
	equal(t, m.Collect(), watched(2, 0, 0), "b's two keys")
}

// testConcurrent: exports running while stores' goroutines observe
// (made-up policy names appearing among them, past MaxPolicies) and the
// watched store is swapped never fail, and no counter an export shows
// ever goes backwards, nor disappears. At the end the counts add up to
// what was decided. A bounded stress run for -race: iteration counts, no
// timing.
func testConcurrent(t *testing.T, e Exporter) {
	m := e.New(t)
	newStore := func() *atomicbucket.Store {
		s, err := atomicbucket.New(keyrate.Limit{Rate: 1, Per: 1 << 40, Burst: 5},
			keyrate.WithClock(clock.NewManual(0)), keyrate.WithObserver(m.Observer))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	stores := []*atomicbucket.Store{newStore(), newStore()}
	if err := m.Watch(stores[0]); err != nil {
		t.Fatal(err)
	}
	// The default policy is seen first, so that it has its own label
	// before the made-up names below take the rest.
	m.Observe(keyrate.Event{Policy: keyrate.DefaultPolicy, Err: keyrate.ErrInvalidKey})

	const (
		workers = 4
		calls   = 2000
	)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
	)
	for w := range workers {
		wg.Go(func() {
			n := 0
			for i := range calls {
				if stores[i%2].Allow(fmt.Sprint("k", i%50)) {
					n++
				}
				// events of made-up policies: more names than MaxPolicies
				m.Observe(keyrate.Event{Policy: fmt.Sprint("p", (w*calls+i)%(2*eventmetrics.MaxPolicies)), Cost: 1, Err: keyrate.ErrUnknownPolicy})
				if i%100 == 0 {
					if err := m.Watch(stores[(i/100)%2]); err != nil {
						t.Error(err) // not FailNow: this is not the test's goroutine
						return
					}
				}
			}
			mu.Lock()
			allowed += n
			mu.Unlock()
		})
	}
	// 30 exports while the workers run (how many overlap them is up to
	// the scheduler), then one after every call.
	var prev Snapshot
	export := func(i int) {
		cur := m.Collect()
		for s, v := range prev {
			if s.Name == Keys {
				continue // a gauge, of whichever store is watched
			}
			got, ok := cur[s]
			if !ok || got < v {
				t.Fatalf("export %d: %v = %v (present %v), was %v: a counter disappeared or went backwards", i, s, got, ok, v)
			}
		}
		prev = cur
	}
	for i := range 30 {
		export(i)
	}
	wg.Wait()
	export(30)
	if got := prev[Series{Name: Decisions, Policy: keyrate.DefaultPolicy, Decision: "allowed"}]; got != float64(allowed) {
		t.Errorf("allowed = %v, want %d", got, allowed)
	}
	if got := prev[Series{Name: Decisions, Policy: keyrate.DefaultPolicy, Decision: "denied"}]; got != float64(workers*calls-allowed) {
		t.Errorf("denied = %v, want %d", got, workers*calls-allowed)
	}
	unknown := 0.0
	for s, v := range prev {
		if s.Name == Errors && s.Error == "unknown_policy" {
			unknown += v
		}
	}
	if unknown != workers*calls {
		t.Errorf("unknown-policy errors = %v, want every made-up policy's event counted once (%d)", unknown, workers*calls)
	}
	if p := policies(prev); len(p) != eventmetrics.MaxUnknownPolicies+1 || !p[eventmetrics.Other] {
		t.Errorf("%d policy label values (other among them: %v), want the default and made-up names, MaxUnknownPolicies in all, and other", len(p), p[eventmetrics.Other])
	}
}

// testAllocs: once a policy has been seen, Observe allocates nothing, for
// each kind of event.
func testAllocs(t *testing.T, e Exporter) {
	m := e.New(t)
	for _, ev := range []keyrate.Event{
		{Key: "k", Policy: "free", Cost: 1, Allowed: true},
		{Key: "k", Policy: "free", Cost: 1, Shadow: true},
		{Key: "k", Policy: "free", Cost: 1, Degraded: true},
		{Key: "k", Policy: "free", Cost: 1, Err: keyrate.ErrStoreFull},
	} {
		m.Observe(ev)
		if n := testing.AllocsPerRun(1000, func() { m.Observe(ev) }); n != 0 {
			t.Errorf("Observe(%+v): %v allocations, want 0", ev, n)
		}
	}
}

// testZero: a Metrics not made by New (the zero value, or nil) neither
// panics nor counts, and Watch says it was not made by New.
func testZero(t *testing.T, e Exporter) {
	for name, m := range e.Zero(t) {
		t.Run(name, func(t *testing.T) {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("panicked: %v", p)
					}
				}()
				m.Observe(keyrate.Event{Key: "k", Policy: "free", Cost: 1, Allowed: true})
				m.Observe(keyrate.Event{Key: "k", Policy: "free", Cost: 1, Err: keyrate.ErrStoreFull})
			}()
			if err := m.Watch(&stats{}); err == nil || !strings.Contains(err.Error(), "not made by New") {
				t.Errorf("Watch = %v, want an error saying the Metrics was not made by New", err)
			}
			if m.Collect != nil {
				equal(t, m.Collect(), Snapshot{}, "a Metrics not made by New")
			}
		})
	}
}
