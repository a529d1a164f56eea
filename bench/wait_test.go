package bench

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/atomicbucket"
	"github.com/keyrate/keyrate/mutexbucket"
	"github.com/keyrate/keyrate/striped"
)

// The wait rows measure what waiting costs when no wait is needed:
// store=<store>/op=<op> on hotkey and uniform-1k, for mutex, striped and
// atomic, where op is
//
//   - wait: Wait(context.Background(), key, 1);
//   - reserve: Reserve(key, 1, reserveMaxWait);
//   - allown: AllowN(key, 1), their baseline.
//
// The targets compare Wait and Reserve with AllowN, and the
// one-window rows (store=<store>/wl=<workload>) call Allow, which returns
// a bool where AllowN builds a Decision: a different call, so the
// baseline is a row of its own, measured beside them in the same run. All
// three call through an interface (subject or keyrate.WaitLimiter), as the
// one-window rows do, so that the rows differ by the method alone. The
// limit is the workload's, open enough that every call is allowed with no
// wait: Wait never sleeps, and every Reserve's Delay is 0 (checked in
// setup, and on every call of the reserve rows).
const (
	opAllowN  = "allown"
	opWait    = "wait"
	opReserve = "reserve"
)

// reserveMaxWait is the reserve rows' maximum wait: positive, so that
// Reserve may reserve a later slot (a maxWait of 0 or less is AllowN),
// though no call needs one.
const reserveMaxWait = time.Second

// waitOps is every op= value, in the order the rows of one store and
// workload run: the baseline first, then what it is compared with.
var waitOps = []string{opAllowN, opWait, opReserve}

// waitWorkloads is the workloads the wait rows run on.
var waitWorkloads = []string{"hotkey", "uniform-1k"}

// waitRow is one wait row: its subject, named <store>/op=<op>, and its op.
type waitRow struct {
	subjectCase
	op string
}

// waitRows is every wait row, by store then op (waitOps order): each
// store's rows are len(waitOps) in a row.
var waitRows = slices.Concat(
	waitRowsOf("mutex", mutexbucket.New),
	waitRowsOf("striped", striped.New),
	waitRowsOf("atomic", atomicbucket.New),
)

// waitRowsOf returns the wait rows of the store named name, one per op.
func waitRowsOf[S subject](name string, newStore func(keyrate.Limit, ...keyrate.Option) (S, error)) []waitRow {
	var rows []waitRow
	for _, op := range waitOps {
		rows = append(rows, waitRow{subjectCase{
			name:    name + "/op=" + op,
			limiter: true,
			new:     store(newStore),
			check:   checkNoWait,
		}, op})
	}
	return rows
}

// checkNoWait is the wait rows' setup check: s is a keyrate.WaitLimiter,
// and a reservation of one token of every key needs no wait (its Delay is
// 0), so that Wait will not sleep and the rows measure the call alone. It
// spends one token of each key. It runs again after each run of a wait
// row: a key whose bucket ran dry during the run would have made some
// calls wait.
func checkNoWait(s subject, keys []string) error {
	w, ok := s.(keyrate.WaitLimiter)
	if !ok {
		return fmt.Errorf("%T is not a keyrate.WaitLimiter", s)
	}
	for _, k := range keys {
		r, err := w.Reserve(k, 1, reserveMaxWait)
		if err != nil {
			return err
		}
		if !r.OK() || r.Delay() != 0 {
			return fmt.Errorf("Reserve(%q, 1, %v): OK %v, Delay %v; want OK with no wait", k, reserveMaxWait, r.OK(), r.Delay())
		}
	}
	return nil
}

// benchWait runs a wait row on a workload whose keys are all known to
// the store, as benchKnown runs the others: allowed/op counts the calls
// that returned nil (wait), were allowed (allown), or reserved with no
// wait (reserve; a reservation for a later slot fails the run).
func benchWait(b *testing.B, row waitRow, wl workload) {
	f := fixtureFor(b, row.subjectCase, wl)
	s, seq := f.s, f.in.seq
	w := s.(keyrate.WaitLimiter) // checked in setup
	mask := len(seq) - 1
	ctx := context.Background()
	var goroutines, allowed, delayed atomic.Int64
	evicted := evictions(s)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(goroutines.Add(1)) * offsetStride
		n, later := int64(0), int64(0)
		switch row.op {
		case opAllowN:
			for pb.Next() {
				if d, err := s.AllowN(seq[i&mask], 1); err == nil && d.Allowed {
					n++
				}
				i++
			}
		case opWait:
			for pb.Next() {
				if w.Wait(ctx, seq[i&mask], 1) == nil {
					n++
				}
				i++
			}
		case opReserve:
			for pb.Next() {
				if r, err := w.Reserve(seq[i&mask], 1, reserveMaxWait); err == nil && r.OK() {
					if r.Delay() == 0 {
						n++
					} else {
						later++
					}
				}
				i++
			}
		default:
			panic("bench: unknown op " + row.op)
		}
		allowed.Add(n)
		delayed.Add(later)
	})
	b.StopTimer()
	checkReused(b, row.name, wl, f, evicted)
	if d := delayed.Load(); d > 0 {
		b.Fatalf("store=%s wl=%s: %d of %d reservations were for a later slot; the row is meant to need no wait", row.name, wl.name, d, b.N)
	}
	if err := checkNoWait(s, f.in.keys); err != nil {
		b.Fatalf("store=%s wl=%s: after the run: %v", row.name, wl.name, err)
	}
	reportAllowed(b, row.subjectCase, wl, allowed.Load())
}
