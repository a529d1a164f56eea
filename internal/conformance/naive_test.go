package conformance

import (
	"runtime"
	"sync"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
)

// naiveStore is what the peers' sweeps do, and what keyrate's stores must
// not: its Sweep checks "full?" under the bucket's lock and deletes the key
// in a separate step, so a spend that lands between the two is lost with
// the removed bucket and the key's next request gets a fresh full one.
type naiveStore struct {
	policy rules.Rule
	mu     sync.Mutex
	m      map[string]*naiveBucket
}

type naiveBucket struct {
	mu    sync.Mutex
	state rules.State
}

func newNaive(t *testing.T, limit keyrate.Limit, clk *clock.Manual) *naiveStore {
	p, err := rules.NewRule(limit, clk)
	if err != nil {
		t.Fatal(err)
	}
	return &naiveStore{policy: p, m: map[string]*naiveBucket{}}
}

func (s *naiveStore) bucket(key string) *naiveBucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	if !ok {
		b = new(naiveBucket)
		s.m[key] = b
	}
	return b
}

func (s *naiveStore) AllowN(key string, cost int) (keyrate.Decision, error) {
	b := s.bucket(key)
	now := s.policy.Now()
	b.mu.Lock()
	next, ok := s.policy.Take(b.state, now, cost)
	b.state = next
	b.mu.Unlock()
	return s.policy.Decide(next, now, cost, ok), nil
}

func (s *naiveStore) Allow(key string) bool {
	d, _ := s.AllowN(key, 1)
	return d.Allowed
}

func (s *naiveStore) Peek(key string) keyrate.Decision {
	b := s.bucket(key)
	b.mu.Lock()
	defer b.mu.Unlock()
	return s.policy.Peek(b.state, s.policy.Now())
}

func (s *naiveStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *naiveStore) Sweep() int {
	now := s.policy.Now()
	s.mu.Lock()
	keys := make(map[string]*naiveBucket, len(s.m))
	for k, b := range s.m {
		keys[k] = b
	}
	s.mu.Unlock()
	n := 0
	for k, b := range keys {
		b.mu.Lock()
		idle := s.policy.Full(b.state, now) // step 1: is it idle?
		b.mu.Unlock()
		if idle {
			runtime.Gosched() // any other goroutine may run here, as it may in production
			s.mu.Lock()
			delete(s.m, k) // step 2: delete, whatever happened since
			s.mu.Unlock()
			n++
		}
	}
	return n
}

func (s *naiveStore) Stats() keyrate.Stats { return keyrate.Stats{Keys: s.Len()} }
func (s *naiveStore) Close() error         { return nil }

// TestSweepRaceCatchesNaiveSweep shows that SweepRace catches a
// check-then-delete sweep: the naive store over-admits in it, reliably.
func TestSweepRaceCatchesNaiveSweep(t *testing.T) {
	eachProcs(t, func(t *testing.T) {
		clk := clock.NewManual(start)
		over, under := SweepRace(newNaive(t, raceLimit, clk), clk, 100, 4)
		if over == 0 {
			t.Fatalf("the naive sweep never over-admitted in 100 rounds (under: %d): SweepRace cannot tell it from a correct one", under)
		}
		t.Logf("naive sweep over-admitted in %d of %d (round, key) pairs", over, 100*raceKeys)
	})
}
