package bench

import (
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// floor is a yardstick, not a limiter, and not a lower bound: what a
// per-key limiter typically does per call, with nothing else. It reads the monotonic clock once, loads the key's word
// from an xsync.MapOf (creating it on first use, as every store must) and
// tries one compare-and-swap on it, with no retry and no arithmetic. It
// "allows" when its swap succeeds. A store that writes nothing on a deny,
// or meets less contention on its compare-and-swap, can take less time.
type floor struct {
	clock clock.Clock
	words *xsync.MapOf[string, *atomic.Uint64]
}

func newFloor(keyrate.Limit) (subject, func(), error) {
	return &floor{clock: clock.System(), words: xsync.NewMapOf[string, *atomic.Uint64]()}, func() {}, nil
}

func newWord() *atomic.Uint64 { return new(atomic.Uint64) }

func (f *floor) Allow(key string) bool {
	now := uint64(f.clock.Now())
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
