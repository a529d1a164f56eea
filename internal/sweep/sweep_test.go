package sweep

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keyrate/keyrate"
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
	if st := b.Stats(7); st != (keyrate.Stats{Keys: 7, Evictions: 3, Refused: 1}) {
		t.Fatalf("Stats = %+v", st)
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
	defer goleak.VerifyNone(t)
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
