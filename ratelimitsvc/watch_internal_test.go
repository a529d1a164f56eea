package ratelimitsvc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// TestWatchReloadsAfterWatcherError: an error of the file system's
// watcher (an overflow of its queue) may mean changes went unseen, so
// Watch reloads after it. The file changes here before Watch watches it,
// as a change whose events were lost; the watcher's error, sent through
// the hook, is the only news.
func TestWatchReloadsAfterWatcherError(t *testing.T) {
	cfg := func(n int) []byte {
		return fmt.Appendf(nil, "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", n)
	}
	path := filepath.Join(t.TempDir(), "api.yaml")
	if err := os.WriteFile(path, cfg(10), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	store, clk, err := NewLocalStore()
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s, err := New(store, c, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, cfg(20), 0o644); err != nil {
		t.Fatal(err)
	}
	watchers := make(chan *fsnotify.Watcher, 1)
	watcherHook = func(w *fsnotify.Watcher) { watchers <- w }
	defer func() { watcherHook = nil }()
	ctx, cancel := context.WithCancel(context.Background())
	reports := make(chan error, 16)
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx, []string{path}, nil, func(err error) { reports <- err }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	(<-watchers).Errors <- fsnotify.ErrEventOverflow // taken by Watch's loop
	for _, want := range []error{fsnotify.ErrEventOverflow, nil} {
		select {
		case err := <-reports:
			if err != want {
				t.Fatalf("reported %v, want %v", err, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no report within 30s, want %v (a reload after the watcher's error)", want)
		}
	}
	if n := s.Config().Rules()[0].Windows[0].RequestsPerUnit; n != 20 {
		t.Fatalf("after the watcher's error, the limit is %d, want the file's 20", n)
	}
}
