package atomicbucket

// RebuildSegmentOf rebuilds the table of key's segment, as its growth
// would, for tests.
func RebuildSegmentOf(s *Store, key string) { s.m.Rebuild(s.m.Segment(s.m.Hash(key))) }

// MemoryOf returns the bytes s's tables and arenas hold, for tests.
func MemoryOf(s *Store) int {
	n := 0
	for i := range s.m.Segments() {
		sg := s.m.At(i)
		sg.Lock()
		n += s.m.Bytes(sg)
		sg.Unlock()
	}
	return n
}
