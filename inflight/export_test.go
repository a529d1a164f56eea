package inflight

// SetHookLoaded sets the function an acquire runs after loading a key's
// state and before counting into it.
func (s *Store) SetHookLoaded(f func(key string)) { s.hookLoaded = f }

// SetHookWait sets the function Acquire runs when it is about to sleep.
func (s *Store) SetHookWait(f func(key string)) { s.hookWait = f }

// SetHookRefused sets the function Acquire runs once refused, before it
// registers as a waiter.
func (s *Store) SetHookRefused(f func(key string)) { s.hookRefused = f }

// SetHookSweep sets the function Sweep runs when it has found a key
// without waiters, before it retires the key.
func (s *Store) SetHookSweep(f func(key string)) { s.hookSweep = f }

// Held returns the slots key holds, -1 if the store does not track it.
func (s *Store) Held(key string) int {
	st, ok := s.keys.Load(key)
	if !ok {
		return -1
	}
	return int(st.n.Load())
}
