package atomicbucket

// LiveOf returns the live keys of s's tables, segment by segment under
// each segment's lock, for the check that Len counts what the
// tables hold.
func LiveOf(s *Store) int {
	n := 0
	for i := range s.m.Segments() {
		sg := s.m.At(i)
		sg.Lock()
		n += s.m.Len(sg)
		sg.Unlock()
	}
	return n
}
