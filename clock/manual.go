package clock

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Manual is a clock that moves only when told to, for tests and for replaying
// recorded traffic. Its zero value reads 0. It is safe for concurrent use:
// Advance and Set may be called while other goroutines read Now.
//
// Unlike a real monotonic clock, a Manual clock may be set backwards, so that
// tests can check how a store treats a stale reading.
//
// # Sleeping
//
// Manual is a Sleeper: a goroutine that waits on it for a reading (a
// store's Wait, through SleepUntil) sleeps until Advance or Set moves the
// clock to that reading or past it, with no runtime timer and no real time
// passing. A test drives such goroutines step by step: AwaitSleepers blocks
// until a given number of them are asleep, and Step moves the clock to the
// earliest reading one of them waits for, waking exactly those due then.
// Between steps nothing moves, so each wakes at the very reading it waited
// for.
type Manual struct {
	now atomic.Int64

	mu       sync.Mutex    // guards the rest, and orders moves with sleeps
	sleepers sleeperHeap   // by reading, then by arrival
	seq      uint64        // arrivals, for the order of sleepers due at one reading
	changed  chan struct{} // closed and replaced when enough sleep for an AwaitSleepers
	awaiting int           // the least n an AwaitSleepers waits for, if changed is not nil
}

var _ Sleeper = (*Manual)(nil)

// NewManual returns a manual clock that reads start.
func NewManual(start time.Duration) *Manual {
	m := new(Manual)
	m.now.Store(int64(start))
	return m
}

// Now returns the clock's current reading.
func (m *Manual) Now() time.Duration { return time.Duration(m.now.Load()) }

// Advance moves the clock by d, which may be negative, wakes every sleeper
// due at the new reading (the earliest first), and returns the new
// reading.
func (m *Manual) Advance(d time.Duration) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := time.Duration(m.now.Add(int64(d)))
	m.wake(t)
	return t
}

// Set moves the clock to t, forwards or backwards, and wakes every sleeper
// due at t (the earliest first).
func (m *Manual) Set(t time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now.Store(int64(t))
	m.wake(t)
}

// Step moves the clock to the earliest reading a sleeper waits for, if
// that is ahead of the clock, and wakes the sleepers due there. It returns
// the clock's reading, and false if nobody sleeps on the clock (it then
// changes nothing).
func (m *Manual) Step() (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sleepers) == 0 {
		return m.Now(), false
	}
	t := max(m.sleepers[0].at, m.Now())
	m.now.Store(int64(t))
	m.wake(t)
	return t, true
}

// Next returns the earliest reading a sleeper waits for, and false if
// nobody sleeps on the clock.
func (m *Manual) Next() (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sleepers) == 0 {
		return 0, false
	}
	return m.sleepers[0].at, true
}

// Sleepers returns the number of goroutines sleeping on the clock.
func (m *Manual) Sleepers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sleepers)
}

// AwaitSleepers blocks until at least n goroutines sleep on the clock,
// returning nil, or until ctx is done, returning ctx.Err() (a nil ctx is
// context.Background()). A test calls it before moving the clock, so that
// the goroutines it started are waiting for the readings it moves to,
// without sleeping in real time.
func (m *Manual) AwaitSleepers(ctx context.Context, n int) error {
	if ctx == nil {
		ctx = context.Background()
	}
	for {
		m.mu.Lock()
		if len(m.sleepers) >= n {
			m.mu.Unlock()
			return nil
		}
		if m.changed == nil || n < m.awaiting {
			m.awaiting = n
		}
		ch := m.changes()
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// SleepUntil blocks until the clock reads t or later, returning nil, or
// until ctx is done, returning ctx.Err() (nil if the clock reached t
// first; a nil ctx is context.Background()). See Sleeper.
func (m *Manual) SleepUntil(ctx context.Context, t time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	m.mu.Lock()
	if m.Now() >= t {
		m.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		m.mu.Unlock()
		return err
	}
	m.seq++
	s := &sleeper{at: t, seq: m.seq, woken: make(chan struct{})}
	heap.Push(&m.sleepers, s)
	if len(m.sleepers) >= m.awaiting {
		m.changed = notify(m.changed)
	}
	m.mu.Unlock()

	select {
	case <-s.woken:
		return nil
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.index < 0 { // woken meanwhile: the clock reached t
		return nil
	}
	heap.Remove(&m.sleepers, s.index)
	return ctx.Err()
}

// wake wakes the sleepers due at reading t, the earliest first; m.mu must
// be held.
func (m *Manual) wake(t time.Duration) {
	for len(m.sleepers) > 0 && m.sleepers[0].at <= t {
		s := heap.Pop(&m.sleepers).(*sleeper)
		close(s.woken)
	}
}

// changes returns a channel closed once m.awaiting goroutines sleep;
// m.mu must be held.
func (m *Manual) changes() chan struct{} {
	if m.changed == nil {
		m.changed = make(chan struct{})
	}
	return m.changed
}

// notify closes ch, if anyone holds it, and returns nil, so that the next
// waiter makes a new one.
func notify(ch chan struct{}) chan struct{} {
	if ch != nil {
		close(ch)
	}
	return nil
}

// sleeper is one goroutine sleeping on a Manual clock until reading at.
type sleeper struct {
	at    time.Duration
	seq   uint64
	index int // in the heap; -1 once woken or removed
	woken chan struct{}
}

// sleeperHeap orders sleepers by reading, then by arrival.
type sleeperHeap []*sleeper

func (h sleeperHeap) Len() int { return len(h) }
func (h sleeperHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h sleeperHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *sleeperHeap) Push(x any) {
	s := x.(*sleeper)
	s.index = len(*h)
	*h = append(*h, s)
}
func (h *sleeperHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	s.index = -1
	*h = old[:len(old)-1]
	return s
}
