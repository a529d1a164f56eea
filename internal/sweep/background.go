package sweep

import (
	"sync"
	"time"
)

// Background is a goroutine that calls a sweep function every interval
// until stopped. The zero value and a nil *Background are stopped ones.
type Background struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Start starts a goroutine that calls sweep every interval, or returns nil
// if interval is not positive.
func Start(interval time.Duration, sweep func()) *Background {
	if interval <= 0 {
		return nil
	}
	t := time.NewTicker(interval)
	g := &Background{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		defer t.Stop()
		for {
			select {
			case <-g.stop:
				return
			case <-t.C:
				sweep()
			}
		}
	}()
	return g
}

// Stop stops the goroutine and waits for it to return, letting a sweep in
// progress finish. It is safe to call more than once, concurrently, and on
// a nil *Background.
func (g *Background) Stop() {
	if g == nil || g.stop == nil {
		return
	}
	g.once.Do(func() { close(g.stop) })
	<-g.done
}
