package atomicbucket

import (
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/config"
)

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

// WithAllHot makes every key of the store hot (WithHotKeys), with shards
// shards whose batches live for lifetime, so that the conformance suite
// runs through the shards, slow keys included.
func WithAllHot(shards int, lifetime time.Duration) keyrate.Option {
	return config.StoreOption("atomicbucket.WithAllHot", func(s *settings) error {
		s.allHot, s.shards, s.lifetime = true, shards, lifetime
		return nil
	})
}

// WithHotShards sets the shard count and lifetime of the store's hot keys.
func WithHotShards(shards int, lifetime time.Duration) keyrate.Option {
	return config.StoreOption("atomicbucket.WithHotShards", func(s *settings) error {
		s.shards, s.lifetime = shards, lifetime
		return nil
	})
}
