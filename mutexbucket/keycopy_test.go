package mutexbucket

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/keyrate/keyrate"
)

// TestKeyCopied: the store keeps its own copy of a new key, so that a key
// that is a substring of a far larger string (a request header's line,
// as httplimit's ByIP or a user's key function may return) does not keep
// that string alive for as long as the key is tracked.
func TestKeyCopied(t *testing.T) {
	s, err := New(keyrate.PerSecond(10))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	line := strings.Repeat("x", 1<<20) + ", 192.0.2.7"
	key := line[len(line)-len("192.0.2.7"):]
	if !s.Allow(key) {
		t.Fatal("a new key was denied")
	}
	lo := uintptr(unsafe.Pointer(unsafe.StringData(line)))
	hi := lo + uintptr(len(line))
	n := 0
	s.buckets.Strings().Range(func(k string, _ *bucket) bool {
		n++
		if p := uintptr(unsafe.Pointer(unsafe.StringData(k))); k == key && p >= lo && p < hi {
			t.Errorf("the store keeps the caller's key %q, which holds the caller's %d-byte string", k, len(line))
		}
		return true
	})
	if n != 1 {
		t.Fatalf("the store holds %d keys, want 1", n)
	}
}
