package striped

import "github.com/keyrate/keyrate/internal/flatmap"

// UseZeroSeed makes s hash its keys under the zero flatmap.Seed, which
// every process knows, so that a test can build keys whose hashes are
// equal. Call it before s holds any key.
func UseZeroSeed(s *Store) { s.seed = flatmap.Seed{} }
