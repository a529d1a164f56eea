package bench

import (
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
)

// floor is a yardstick, not a limiter, and not a lower bound: what a
// per-key limiter typically does per call, with nothing else. It reads the
// monotonic clock once (time.Since a fixed origin, called directly: a
// clock.Clock behind an interface would add a call of its own), loads the
// key's word from an xsync.MapOf (creating it on first use, as every store
// must; never in a run on known keys) and tries one compare-and-swap on
// it, with no retry and no arithmetic. It "allows" when its swap
// succeeds. A store that writes nothing on a deny, or meets less
// contention on its compare-and-swap, can take less time.
//
// It is BenchmarkLeanFloor's three operations behind the driver's call
// through subject, which every store pays as well (see bench/doc.go, "The
// floor").
type floor struct {
	origin time.Time
	words  *xsync.MapOf[string, *atomic.Uint64]
}

func newFloor(keyrate.Limit) (subject, func(), error) {
	return &floor{origin: time.Now(), words: xsync.NewMapOf[string, *atomic.Uint64]()}, func() {}, nil
}

func newWord() *atomic.Uint64 { return new(atomic.Uint64) }

func (f *floor) Allow(key string) bool {
	now := uint64(time.Since(f.origin))
	w, ok := f.words.Load(key)
	if !ok {
		w, _ = f.words.LoadOrCompute(key, newWord)
	}
	old := w.Load()
	return w.CompareAndSwap(old, max(old, now)+1)
}

func (f *floor) AllowN(key string, _ int) (keyrate.Decision, error) {
	return keyrate.Decision{Allowed: f.Allow(key)}, nil
}

func (f *floor) Len() int { return f.words.Size() }
