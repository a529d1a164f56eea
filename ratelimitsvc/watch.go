package ratelimitsvc

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long Watch waits after a change for more before
// it reloads: an editor's save, or a symlink swap of a Kubernetes
// ConfigMap, is several events.
const DefaultDebounce = 200 * time.Millisecond

// watcherHook, if not nil, is given Watch's file system watcher (tests
// send it errors).
var watcherHook func(*fsnotify.Watcher)

// Watch reloads the config from paths (see ReloadFiles) whenever a file
// in one of them changes, and whenever a value arrives on trigger (such as
// SIGHUP), until ctx is done; then it returns nil. A path that is a
// directory is watched for its files; a file, through its directory, so
// that a file replaced by a rename or a symlink swap is seen. Changes
// closer together than DefaultDebounce make one reload. Each reload's
// outcome goes to report (nil for success; the config in force stays
// after an error), if report is not nil, and so does an error the file
// system's watcher reports, which a reload follows (events may have been
// lost). A watched directory removed and made again is watched again. It
// returns an error only if the paths cannot be watched.
func (s *Service) Watch(ctx context.Context, paths []string, trigger <-chan struct{}, report func(error)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if watcherHook != nil {
		watcherHook(w)
	}
	dirs := map[string]bool{} // the directories watched for their files
	for _, p := range paths {
		dir := p
		if fi, err := os.Stat(p); err != nil {
			return err
		} else if !fi.IsDir() {
			dir = filepath.Dir(p)
		}
		dir = filepath.Clean(dir)
		if dirs[dir] {
			continue
		}
		dirs[dir] = true
		if err := w.Add(dir); err != nil {
			return err
		}
	}
	// Each directory's parent is watched too, for the directory itself:
	// one removed and made again is a new directory, which the watch on
	// the old one never sees; a reload watches it again.
	for dir := range dirs {
		if parent := filepath.Dir(dir); parent != dir && !dirs[parent] {
			_ = w.Add(parent) // without it, a removed directory goes unseen, as before
		}
	}
	relevant := func(name string) bool {
		name = filepath.Clean(name)
		return dirs[name] || dirs[filepath.Dir(name)]
	}
	reload := func() {
		for dir := range dirs {
			_ = w.Add(dir) // a directory made again; one still missing fails the reload
		}
		err := s.ReloadFiles(paths...)
		if report != nil {
			report(err)
		}
	}
	var debounce <-chan time.Time
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	due := func() <-chan time.Time { // a reload, DefaultDebounce after the last call
		if timer == nil {
			timer = time.NewTimer(DefaultDebounce)
		} else {
			timer.Reset(DefaultDebounce)
		}
		return timer.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-trigger:
			reload()
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if !relevant(ev.Name) {
				continue // a sibling of a watched directory
			}
			debounce = due()
		case <-debounce:
			debounce = nil
			reload()
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			if report != nil {
				report(err)
			}
			// Events may have been lost (the watcher's queue overflowed):
			// reload, to be sure.
			debounce = due()
		}
	}
}
