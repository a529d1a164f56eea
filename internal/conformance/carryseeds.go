package conformance

import (
	"time"

	"github.com/keyrate/keyrate"
)

// Limits of the seeds, each one of CarryLimits.
var (
	carryPerSecond10 = keyrate.PerSecond(10)
	carryPerHour100  = keyrate.PerHour(100)
	carrySliding3    = keyrate.Limit{Rate: 3, Per: time.Second}.Using(keyrate.SlidingWindow)
	carryFixed3      = keyrate.Limit{Rate: 3, Per: time.Second}.Using(keyrate.FixedWindow)
	carryLog10       = keyrate.Limit{Rate: 10, Per: 10 * time.Second}.Using(keyrate.SlidingLog)
	carryLog2        = keyrate.Limit{Rate: 2, Per: time.Second}.Using(keyrate.SlidingLog)
	carryLog5        = keyrate.Limit{Rate: 5, Per: time.Second}.Using(keyrate.SlidingLog)
	carryFixed20h    = keyrate.Limit{Rate: 20, Per: time.Hour}.Using(keyrate.FixedWindow)
	carrySliding6    = keyrate.Limit{Rate: 6, Per: 100 * time.Millisecond}.Using(keyrate.SlidingWindow)
	carry5Burst8     = keyrate.Limit{Rate: 5, Per: time.Second, Burst: 8}
)

// CarrySeed is a named input of CarryModel.
type CarrySeed struct {
	Name  string
	Input []byte
}

// CarrySeeds are inputs of CarryModel that reproduce over-admissions of
// an older carry rule (windows matched by position, a window's or a log's
// debt read as what it counts now), for the fuzz targets' seeds. Each
// fails on a store that carries so.
func CarrySeeds() []CarrySeed {
	hundredOverTenSeconds := func(in *CarryInput) *CarryInput {
		for i := range 10 {
			if i > 0 {
				in.Advance(time.Second)
			}
			in.AllowN(0, 10)
		}
		return in
	}
	return []CarrySeed{
		// A key spends an hour's 100 at once, then asks a sliding window of
		// 3 a second for 1 (denied: it owes 100, laid 3 to a window over 34
		// windows), at the same instant. Back under the hour, it still owes
		// 100: AllowN(90) must be denied. An older rule read the window's
		// debt as its current count, 3, and admitted 90: 190 at one instant.
		{"sliding-window-forgets-the-hour", NewCarryInput(false, []keyrate.Limit{carryPerHour100}, []keyrate.Limit{carrySliding3}).
			AllowN(0, 100).AllowTier(0, 1, 1).AllowN(0, 90).Bytes()},
		// The same through a fixed window.
		{"fixed-window-forgets-the-hour", NewCarryInput(false, []keyrate.Limit{carryPerHour100}, []keyrate.Limit{carryFixed3}).
			AllowN(0, 100).AllowTier(0, 1, 1).AllowN(0, 90).Bytes()},
		// A log of 10 per 10s admits 10; a log of 2 a second is asked for
		// 2 (denied: it owes 10, one admission leaving after 5s). A second
		// later the short log is asked again (denied: it still owes 10),
		// then the long one for 8, which must be denied too: the 10 are
		// in its window for 9 more seconds. An older rule admitted 20 in
		// 1s against a limit of 10 per 10s.
		{"log-to-log-forgets", NewCarryInput(true, []keyrate.Limit{carryLog10}, []keyrate.Limit{carryLog2}).
			AllowN(0, 10).AllowTier(0, 1, 2).Advance(time.Second).AllowTier(0, 1, 2).AllowN(0, 8).Bytes()},
		// 100 spent over 10s under [10 a second, 100 an hour]; the key is
		// moved to [10 a second] and back at one instant. The hourly debt
		// rides in the one window of the second policy (its length is not
		// there) and comes back: a second later AllowN(10) must be denied.
		// Windows matched by position forgot it: the hour's window started
		// full again.
		{"hour-dropped-and-added-back", hundredOverTenSeconds(NewCarryInput(false,
			[]keyrate.Limit{carryPerSecond10, carryPerHour100}, []keyrate.Limit{carryPerSecond10})).
			AllowTier(0, 1, 1).Peek(0).AllowN(0, 1).Peek(0).Advance(time.Second).AllowN(0, 10).Bytes()},
		// 100 spent over 10s under [10 a second, 100 an hour], whose
		// windows SetPolicy then reverses, at one instant. Windows matched
		// by length carry exactly; by position, the hour's window took the
		// second's debt of 10 and the second's took the hour's: 10s later
		// 10 more were admitted where the hour allows none.
		{"reordered-windows", hundredOverTenSeconds(NewCarryInput(false,
			[]keyrate.Limit{carryPerSecond10, carryPerHour100})).
			Peek(0).Reorder(0).AllowN(0, 1).Peek(0).Advance(10*time.Second).AllowN(0, 10).Bytes()},

		// The following were found by fuzzing this target.
		//
		// 7 counted in a fixed window of 20 an hour are carried to a
		// sliding window of 3 a second as 3, 3 and 1 in this window and
		// the next two, and back: the hour's window owes all 7 (debt out
		// counts every window after t's). Reading only some of them, a
		// Peek reported 16 left where 13 are.
		{"spilled-counts-forgotten", NewCarryInput(false, []keyrate.Limit{carryFixed20h}, []keyrate.Limit{carrySliding3}).
			AllowN(0, 7).AllowTier(0, 1, 1).Peek(0).AllowN(0, 14).Bytes()},
		// 10 spent under [10 a second]; under [100 an hour, 10 a second]
		// the second's window, matched by length, owes them: AllowN(1)
		// must be denied. By position the hour's window took the debt and
		// the second's started full.
		{"window-matched-by-position", NewCarryInput(false, []keyrate.Limit{carryPerHour100, carryPerSecond10}, []keyrate.Limit{carryPerSecond10}).
			AllowTier(0, 1, 10).AllowN(0, 1).Bytes()},
		// 4 owed in a bucket of 5 a second (burst 8) carried to a sliding
		// window of 6 per 100ms; a reservation of 6 there is counted two
		// windows ahead and cancelled, which leaves the state ahead (the
		// documented cost of Cancel); back in the bucket at the same
		// instant the key still owes 4 (carry.md: a state ahead of t's
		// window takes the windows it lost as N each), so AllowN(5) must
		// be denied. It was admitted: the state ahead forgot the 4.
		// (redisbucket refuses the reservation, and passes.)
		{"cancel-ahead-forgets-count", NewCarryInput(false, []keyrate.Limit{carry5Burst8}, []keyrate.Limit{carrySliding6}).
			AllowN(0, 4).ReserveTier(0, 1, 6, time.Second).Cancel(0).AllowN(0, 5).Bytes()},
		// 4 counted in a sliding window carried to a log of 2 a second,
		// which then owes 4, more than its N: a refund there gives nothing
		// back (carry.md, "Refunds and cancels"), so back in the window
		// AllowN(3) must be denied. The log gave 1 back.
		{"log-refund-while-owing", NewCarryInput(true, []keyrate.Limit{carrySliding6}, []keyrate.Limit{carryLog2}).
			AllowN(0, 4).RefundTier(0, 1, 1).AllowN(0, 3).Bytes()},
		// 4 in a log of 5 a second carried to a log of 2 a second (the
		// same length, but 4 is more than its N) is one admission of 4
		// leaving after ⌈4/2⌉ = 2 windows; back in the log of 5 it is
		// kept (4 fits 5) until then. 1.1s after it the key has 1 left;
		// 0.5s later still none. The older rule let it leave after one
		// window: 4 left.
		{"log-debt-leaves-early", NewCarryInput(true, []keyrate.Limit{carryLog5}, []keyrate.Limit{carryLog2}).
			AllowN(0, 2).Advance(500*time.Millisecond).AllowN(0, 2).AllowTier(0, 1, 1).Advance(600*time.Millisecond).
			Peek(0).AllowN(0, 1).AllowN(0, 1).Advance(500*time.Millisecond).Peek(0).AllowN(0, 1).AllowN(0, 1).Bytes()},
	}
}

// CarryFleetSeeds are inputs of CarryModel for an opener of two members
// (a fleet whose processes were started with different default limits):
// a request through the other member moves the key to that member's
// default policy, and carries it.
func CarryFleetSeeds() []CarrySeed {
	return []CarrySeed{
		// Member 1 (10 a second) spends 10; through member 0 (100 an hour)
		// the key owes those 10 there: AllowN(91) must be denied. A value
		// of one window under the default policy records no limits, so
		// each member read the other's state as its own default's: the
		// TAT 1s ahead, 1/36 of a token of the hour, and admitted 99.
		{"fleet-default-one-window", NewCarryInput(false, []keyrate.Limit{carryPerHour100}).Alt(carryPerSecond10).
			Member(1).AllowN(0, 10).Member(0).AllowN(0, 91).Bytes()},
		// The other way: 100 an hour spent, then 10 a second asked for 10
		// a second later. The key owes 100 tokens of 100ms there: denied.
		// Reading the hour's TAT as the second's owes 36 000 and denies
		// too, so this one passes on the older rule: a start for the
		// fuzzer, not a reproducer.
		{"fleet-default-to-faster", NewCarryInput(false, []keyrate.Limit{carryPerHour100}).Alt(carryPerSecond10).
			AllowN(0, 100).Member(1).Advance(time.Second).AllowN(0, 10).Bytes()},
	}
}
