package sweep

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/leaktest"
	"github.com/keyrate/keyrate/internal/rules"
)

func TestBookCap(t *testing.T) {
	var b Book
	b.Init(100)
	var got atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if b.Reserve() {
					got.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got.Load() != 100 {
		t.Fatalf("reserved %d slots of 100 with 800 tries", got.Load())
	}
	b.Release(1)
	if !b.Reserve() || b.Reserve() {
		t.Fatal("want exactly one slot after releasing one")
	}
	if err := b.Refuse(); !errors.Is(err, keyrate.ErrStoreFull) {
		t.Fatalf("Refuse() = %v, want ErrStoreFull", err)
	}
	b.Evicted(3)
	if st := b.Stats(); st != (keyrate.Stats{Keys: 100, Evictions: 3, Refused: 1}) {
		t.Fatalf("Stats = %+v, want 100 keys, 3 evictions, 1 refused", st)
	}
}

func TestBookUncapped(t *testing.T) {
	var b Book
	b.Init(0)
	for i := 0; i < 1000; i++ {
		if !b.Reserve() {
			t.Fatal("an uncapped book refused a slot")
		}
	}
	if b.Capped() {
		t.Fatal("Capped() = true without a cap")
	}
	b.Release(10)
	if n := b.Keys(); n != 990 {
		t.Fatalf("Keys() = %d after 1000 reserved and 10 released, want 990", n)
	}
}

func TestPacer(t *testing.T) {
	var p Pacer
	p.Init(4)
	for _, c := range []struct {
		w    int
		want bool
	}{{1, false}, {1, false}, {1, false}, {1, true}, {1, false /* busy */}} {
		if got := p.Charge(c.w); got != c.want {
			t.Fatalf("Charge(%d) = %v, want %v", c.w, got, c.want)
		}
	}
	p.Reset(10) // the sweep left 10 keys: the next is due after 10 events
	p.Swept()
	if p.Charge(9) {
		t.Fatal("due after 9 of 10")
	}
	if !p.Charge(RefusalWeight) {
		t.Fatal("not due after a refusal took it past 10")
	}
}

func TestBackground(t *testing.T) {
	defer leaktest.Verify(t)
	var nilBg *Background
	nilBg.Stop() // no sweeper: a no-op
	if Start(0, func() {}) != nil {
		t.Fatal("Start(0) started a goroutine")
	}
	swept := make(chan struct{}, 1)
	g := Start(time.Millisecond, func() {
		select {
		case swept <- struct{}{}:
		default:
		}
	})
	<-swept // it runs
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); g.Stop() }()
	}
	wg.Wait()
	g.Stop()
}

// hookBucket is a mutex bucket whose Evict runs a function after it has
// marked the bucket rules.Tombstone and before it returns: the window
// in which a sweep has marked a bucket and not yet dropped it.
type hookBucket struct {
	mu      sync.Mutex
	b       Block
	onEvict func()
}

func (b *hookBucket) Rules() *rules.Rules { return b.b.Rules }

func (b *hookBucket) Evict(t time.Duration, floor *Floor) bool {
	b.mu.Lock()
	if !b.b.Full(t, floor) {
		b.mu.Unlock()
		return false
	}
	b.b.SetFirst(rules.Tombstone)
	f := b.onEvict
	b.onEvict = nil
	b.mu.Unlock()
	if f != nil {
		f()
	}
	return true
}

func (b *hookBucket) SpendRare(t time.Duration, cost int, wait time.Duration, floor *Floor) (s States, at time.Duration, denied int, swept bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.First() == rules.Tombstone {
		return s, t, 0, true
	}
	t, denied = b.b.Spend(t, cost, wait, floor, s[:b.b.Rules.Len()])
	return s, t, denied, false
}

func (b *hookBucket) Cancel(end rules.State, slot time.Duration, cost int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Cancel(end, b.b.Rules.Now(), slot, cost)
}

func (b *hookBucket) Refund(t time.Duration, cost int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.Refund(t, cost)
	return b.b.First() == rules.Tombstone
}

func (b *hookBucket) Retire() (s States, fresh, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.First() == rules.Tombstone {
		return s, false, false
	}
	fresh = b.b.First() == Fresh
	if !fresh {
		b.b.Load(s[:b.b.Rules.Len()])
	}
	b.b.SetFirst(rules.Tombstone)
	return s, fresh, true
}

func (b *hookBucket) Swept() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.First() == rules.Tombstone
}

func (b *hookBucket) States() (s States, live bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.First() >= Fresh {
		return s, false
	}
	b.b.Load(s[:b.b.Rules.Len()])
	return s, true
}

// TestFullStoreMarkedNotDropped: a new key that finds a full store while a
// sweep has marked a bucket and not yet dropped it is not refused: the
// marked key is going, so the caller drops it itself and takes its slot.
// The sweep's Evict inserts the new key in that very window, every run.
func TestFullStoreMarkedNotDropped(t *testing.T) {
	for _, hashed := range []bool{false, true} {
		t.Run(fmt.Sprint("hashed=", hashed), func(t *testing.T) {
			clk := clock.NewManual(0)
			opts := []keyrate.Option{keyrate.WithClock(clk), keyrate.WithMaxKeys(1)}
			if hashed {
				opts = append(opts, keyrate.WithHashedKeys())
			}
			var m Map[*hookBucket]
			var pols *rules.Policies
			if err := m.Init(&pols, keyrate.PerSecond(10), opts, func(rs *rules.Rules, s []rules.State) *hookBucket {
				b := new(hookBucket)
				b.b.Init(rs, s)
				return b
			}); err != nil {
				t.Fatal(err)
			}
			take := func(key string) (bool, error) {
				_, _, denied, err := m.Take(key, pols.Default(), 1, 0)
				return denied < 0, err
			}
			m.Close() // paced sweeps run on the caller: nothing runs beside the test
			if ok, err := take("a"); !ok || err != nil {
				t.Fatalf("Take(a) = %v, %v", ok, err)
			}
			clk.Advance(time.Second) // a is full again
			a, _ := m.Load("a")
			var inserted bool
			var insertErr error
			a.onEvict = func() {
				inserted, insertErr = take("b")
			}
			if n := m.Sweep(); n != 1 {
				t.Fatalf("Sweep removed %d, want 1", n)
			}
			if a.onEvict != nil {
				t.Fatal("the sweep did not run the hook: the window was not driven")
			}
			if insertErr != nil || !inserted {
				t.Fatalf("Take(new key b), with a marked by a sweep and not yet dropped, = %v, %v; want allowed", inserted, insertErr)
			}
			if st := m.Stats(); st.Keys != 1 || st.Refused != 0 {
				t.Fatalf("Stats = %+v, want 1 key (b), none refused", st)
			}
			if _, ok := m.Load("a"); ok {
				t.Fatal("a is still in the map")
			}
		})
	}
}
