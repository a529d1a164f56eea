package redisbucket

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/rules"
)

// TestKeyCopied: the deny cache and the lease table keep their own copies
// of a key, so that a key that is a substring of a far larger string (a
// request header's line) does not keep that string alive for as long as
// they hold the key; a deny cache entry put again for a key reuses its
// copy.
func TestKeyCopied(t *testing.T) {
	line := strings.Repeat("x", 1<<20) + ", 192.0.2.7"
	key := line[len(line)-len("192.0.2.7"):]
	lo := uintptr(unsafe.Pointer(unsafe.StringData(line)))
	pinned := func(k string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(k)))
		return p >= lo && p < lo+uintptr(len(line))
	}

	rs, err := rules.NewRules(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{keyrate.PerHour(1)}}, clock.NewManual(0))
	if err != nil {
		t.Fatal(err)
	}
	c := newDenyCache(16)
	st := []rules.State{rules.State(0)}
	c.put(key, rs, st, 0, time.Second)
	var first string
	for i := range c.bucket(key) {
		if e := c.bucket(key)[i].Load(); e != nil && e.key == key {
			first = e.key
		}
	}
	if first == "" || pinned(first) {
		t.Fatalf("the deny cache holds %q pinned %v; want its own copy", first, first != "" && pinned(first))
	}
	c.put(line[len(line)-len("192.0.2.7"):], rs, st, 0, 2*time.Second)
	for i := range c.bucket(key) {
		if e := c.bucket(key)[i].Load(); e != nil && e.key == key && unsafe.StringData(e.key) != unsafe.StringData(first) {
			t.Errorf("a second put for the key made another copy")
		}
	}

	ls := newLeases(Lease{Size: 2, Life: time.Second, Keys: 64}, clock.NewManual(0))
	if ls.entry(key, 0) == nil {
		t.Fatal("the lease table had no room for a key")
	}
	for i := range ls.shards {
		for k := range ls.shards[i].m {
			if pinned(k) {
				t.Errorf("the lease table keeps the caller's key %q", k)
			}
		}
	}
}
