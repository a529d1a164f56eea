package inflight

import (
	"context"
	"fmt"
)

// Acquire takes a slot of key, waiting for one while the key is at its
// limit, until ctx is done: it then returns the zero Slot and an error
// that wraps ctx's (errors.Is(err, context.Canceled) or
// context.DeadlineExceeded holds). A release wakes the key's waiters, who
// race for the slot with each other and with new acquires: there is no
// queue, so a waiter may wait longer than one that came later. Waiting
// costs nothing while no one waits: the key's wake-up channel is made
// only when an Acquire must sleep. An invalid key gets TryAcquire's error.
// A nil ctx is context.Background(): a wait with no end. A ctx marked by
// Critical may take the slots WithReserved keeps.
func (s *Store) Acquire(ctx context.Context, key string) (Slot, error) {
	if err := checkKey(key); err != nil { // before ctx's: bad input names itself, whatever ctx is
		return Slot{}, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	limit := s.limitFor(ctx)
	for {
		if err := ctx.Err(); err != nil {
			return Slot{}, fmt.Errorf("inflight: waiting for a slot of %q: %w", key, err)
		}
		slot, err := s.tryAcquire(key, limit)
		if err != nil || slot.Acquired() {
			return slot, err
		}
		if s.hookRefused != nil {
			s.hookRefused(key)
		}
		st, ok := s.keys.Load(key)
		if !ok {
			continue // swept since: try again
		}
		wake := st.await()
		// A release between the refusal and await saw no waiter: try
		// again now that a release will see this one.
		slot, err = s.tryAcquire(key, limit)
		if err != nil || slot.Acquired() {
			st.waiters.Add(-1)
			return slot, err
		}
		if st.n.Load() == dead {
			// A sweep that checked st for waiters before await retired
			// it after: no release closes its channel any more, and the
			// retry was refused by the key's new state. Wait on that.
			st.waiters.Add(-1)
			continue
		}
		if s.hookWait != nil {
			s.hookWait(key)
		}
		select {
		case <-wake:
		case <-ctx.Done():
		}
		st.waiters.Add(-1)
	}
}

// await counts a waiter on st and returns the channel a release closes.
func (st *keyState) await() <-chan struct{} {
	st.waiters.Add(1)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.wake == nil {
		st.wake = make(chan struct{})
	}
	return st.wake
}
