package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// BenchmarkAlgorithm measures each algorithm on each store, in one run:
// store=<store>/alg=<algorithm>/wl=<workload> on hotkey and uniform-1k,
// every row under 125 requests a microsecond (a token bucket of burst 125,
// a token every 8ns; windows of a microsecond, about the most a sliding
// window's state counts in a window that short: see keyrate.Algorithm).
// A key then crosses a window at almost every call, the window
// transition's dearest case. Nearly every call is allowed, but not all: a
// hot key's calls can come faster than 125 in some microsecond (two
// goroutines on one core, or a window that setup's spend left half full),
// so the rows report allowed/op without checking it. The stores sweep in the
// background once an hour, which is never during a run: their keys are
// full again within two microseconds, and the incremental maintenance that
// inserting keys drives would evict them during setup and churn them
// during the run, which is not what the rows measure. "keyrate report" does not read these rows (make report
// runs BenchmarkAllow and BenchmarkMemory); docs/algorithms.md holds a
// run of them.
func BenchmarkAlgorithm(b *testing.B) {
	for _, row := range algorithmRows {
		for _, name := range row.workloads {
			wl := workloadNamed(b, name)
			wl.limit = row.limit // setup spends half of the row's limit
			b.Run("store="+row.name+"/wl="+wl.name, func(b *testing.B) {
				benchKnown(b, row.subjectCase, wl)
			})
		}
	}
}

// algorithmLimits are BenchmarkAlgorithm's limits, one per algorithm
// every store carries.
var algorithmLimits = []keyrate.Limit{
	{Rate: 125, Per: time.Microsecond, Burst: 125},
	keyrate.Limit{Rate: 125, Per: time.Microsecond}.Using(keyrate.FixedWindow),
	keyrate.Limit{Rate: 125, Per: time.Microsecond}.Using(keyrate.SlidingWindow),
}

// logLimit is BenchmarkAlgorithm's sliding-log limit, for the stores that
// carry it (mutexbucket and striped): a key's log then holds up to 125
// entries.
var logLimit = keyrate.Limit{Rate: 125, Per: time.Microsecond}.Using(keyrate.SlidingLog)

// algorithmRow is one algorithm row: its subject (named
// <store>/alg=<algorithm>), which enforces limit whatever limit it is
// given, and the workloads it runs on.
type algorithmRow struct {
	subjectCase
	limit     keyrate.Limit
	workloads []string
}

// algorithmRows is every algorithm row, in report order.
var algorithmRows = slices.Concat(
	algorithmRowsOf("mutex", mutexbucket.New, logLimit),
	algorithmRowsOf("striped", striped.New, logLimit),
	algorithmRowsOf("atomic", atomicbucket.New),
)

// algorithmRowsOf returns the algorithm rows of the store named name: one
// per algorithmLimits, and one per extra limit (those only some stores
// carry).
func algorithmRowsOf[S interface {
	subject
	Close() error
}](name string, newStore func(keyrate.Limit, ...keyrate.Option) (S, error), extra ...keyrate.Limit) []algorithmRow {
	var rows []algorithmRow
	for _, l := range slices.Concat(algorithmLimits, extra) {
		rows = append(rows, algorithmRow{
			subjectCase: subjectCase{
				name: name + "/alg=" + l.Algorithm.String(),
				new: func(keyrate.Limit) (subject, func(), error) {
					s, err := newStore(l, keyrate.WithSweepInterval(time.Hour))
					if err != nil {
						return nil, nil, err
					}
					return s, func() { s.Close() }, nil
				},
			},
			limit:     l,
			workloads: []string{"hotkey", "uniform-1k"},
		})
	}
	return rows
}
