package redisbucket

import (
	"fmt"
	"strings"

	"github.com/keyrate/keyrate"
)

// MaxKeyLen is the longest user key a Store accepts, in bytes. Keys are
// binary-safe: any bytes, of length 1 to MaxKeyLen.
const MaxKeyLen = 512

// checkKey returns nil for a key the store can hold, else an error wrapping
// keyrate.ErrInvalidKey that names the bound.
func checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: the empty key (a key function that found nothing?)", keyrate.ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes is longer than %d", keyrate.ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}

// redisKey returns the Redis key of user key key.
func (s *Store) redisKey(key string) string {
	if s.set.hashTag {
		return s.set.prefix + "{" + key + "}"
	}
	return s.set.prefix + key
}

// scanPattern returns the SCAN MATCH pattern for every key under prefix:
// the prefix with glob metacharacters escaped, then "*".
func scanPattern(prefix string) string {
	var b strings.Builder
	for i := 0; i < len(prefix); i++ {
		switch c := prefix[i]; c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('*')
	return b.String()
}
