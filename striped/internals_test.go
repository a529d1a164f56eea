package striped

import "github.com/keyrate/keyrate/internal/flatmap"

// UseZeroSeed makes s hash its keys under the zero flatmap.Seed, which
// every process knows, so that a test can build keys whose hashes are
// equal. Call it before s holds any key.
func UseZeroSeed(s *Store) { s.seed = flatmap.Seed{} }

// KeysHeld returns the keys s's tables hold, counted stripe by stripe
// (for a store at rest: Len reads a counter of its own).
func KeysHeld(s *Store) int {
	n := 0
	for i := range s.tab.stripes {
		sp := &s.tab.stripes[i]
		sp.mu.Lock()
		n += sp.m.Len()
		sp.mu.Unlock()
	}
	return n
}
