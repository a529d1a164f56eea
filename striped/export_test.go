package striped

// MemoryOf returns the bytes s's tables and arenas hold, for tests.
func MemoryOf(s *Store) int {
	n := 0
	for i := range s.tab.stripes {
		sp := &s.tab.stripes[i]
		sp.mu.Lock()
		n += sp.m.Bytes()
		sp.mu.Unlock()
	}
	return n
}
