package bench

import (
	"sync/atomic"
	"testing"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/keyrateprom"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// BenchmarkObserver measures what keyrate.WithObserver costs, in one run:
// store=<store>/observer=<observer>/wl=<workload>, with no observer (the
// default: a nil check per call), an observer that only counts (one
// atomic add), and keyrateprom's. "keyrate report" does not read these
// rows.
func BenchmarkObserver(b *testing.B) {
	var counted atomic.Int64
	count := keyrate.ObserverFunc(func(keyrate.Event) { counted.Add(1) })
	observers := []struct {
		name string
		opts func() []keyrate.Option
	}{
		{"none", func() []keyrate.Option { return nil }},
		{"count", func() []keyrate.Option { return []keyrate.Option{keyrate.WithObserver(count)} }},
		{"prometheus", func() []keyrate.Option { return []keyrate.Option{keyrate.WithObserver(keyrateprom.New("bench"))} }},
	}
	for _, st := range []struct {
		name string
		new  func(opts ...keyrate.Option) func(keyrate.Limit) (subject, func(), error)
	}{
		{"mutex", func(opts ...keyrate.Option) func(keyrate.Limit) (subject, func(), error) {
			return store(mutexbucket.New, opts...)
		}},
		{"striped", func(opts ...keyrate.Option) func(keyrate.Limit) (subject, func(), error) {
			return store(striped.New, opts...)
		}},
		{"atomic", func(opts ...keyrate.Option) func(keyrate.Limit) (subject, func(), error) {
			return store(atomicbucket.New, opts...)
		}},
	} {
		for _, o := range observers {
			sc := subjectCase{name: st.name + "/observer=" + o.name, limiter: true, new: st.new(o.opts()...)}
			for _, name := range []string{"hotkey", "uniform-1k"} {
				wl := workloadNamed(b, name)
				b.Run("store="+sc.name+"/wl="+wl.name, func(b *testing.B) {
					benchKnown(b, sc, wl)
				})
			}
		}
	}
}
