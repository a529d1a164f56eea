package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
)

// CarrySetup is what CarryModel decoded from its input for an opener:
// the stores' policies, their policy function and their clock.
type CarrySetup struct {
	// Policies are the named policies, the default (named
	// keyrate.DefaultPolicy, never unlimited) first: give them all to
	// keyrate.WithPolicies, and Policies[0].Limits[0] to New.
	Policies []keyrate.Policy
	// Alt is a second default policy (named keyrate.DefaultPolicy, never
	// unlimited), for an opener whose stores have a second member: a
	// process of the same fleet started with another default limit.
	Alt keyrate.Policy
	// PolicyOf is the function to give keyrate.WithPolicyFunc.
	PolicyOf func(key string) string
	// Clock is the manual clock every store reads (keyrate.WithClock, or
	// a time source): CarryModel only moves it forwards, by whole µs.
	Clock *clock.Manual
	// Logs reports whether Policies (or a later SetPolicy) may hold a
	// keyrate.SlidingLog limit: an opener returns only stores that carry
	// logs when it is set.
	Logs bool
}

// CarryStore is one store CarryModel drives, or one fleet: its members
// share every key's state (one in-process store has one member;
// redisbucket processes on one server and prefix are a fleet).
// CarryModel makes every call through the member its input picks, and
// requires every CarryStore of a run to decide every call alike.
type CarryStore struct {
	// Name names the store in failures.
	Name string
	// Members are the store's members, all built with CarrySetup's
	// policies, policy function and clock: Members[0] with its default
	// policy Policies[0], Members[1] (if any) with Alt.
	Members []keyrate.WaitLimiter
	// Origin is the reading windows of a window algorithm are aligned to:
	// a window of length W starts at every Origin + k·W (an in-process
	// store's clock reading at New; 0 for redisbucket, whose windows are
	// aligned to its time source's Unix epoch).
	Origin time.Duration
	// WindowReservations reports whether Reserve and Wait work under a
	// policy with a fixed or sliding window; if not, they must return an
	// error wrapping keyrate.ErrUnsupportedAlgorithm there.
	WindowReservations bool
	// Sweep removes the store's full buckets; nil for a store without.
	Sweep func()
}

// OpenCarryModel builds the stores CarryModel drives for setup, each
// closed when t ends.
type OpenCarryModel func(t *testing.T, setup CarrySetup) []CarryStore

// CarryLimits are the limits CarryModel's inputs build policies from,
// by index: token buckets, fixed and sliding windows of 100ms to an hour
// and sliding logs, several of one length (Per), each a whole number of
// µs long (as redisbucket requires of a window), a log's N at most 1024
// (redisbucket.MaxLogRate). Without logs (CarrySetup.Logs unset) a log
// stands for the sliding window of its Rate and Per.
var CarryLimits = []keyrate.Limit{
	keyrate.PerSecond(10), // 0
	keyrate.PerHour(100),  // 1
	keyrate.Limit{Rate: 3, Per: time.Second}.Using(keyrate.SlidingWindow),            // 2
	keyrate.Limit{Rate: 3, Per: time.Second}.Using(keyrate.FixedWindow),              // 3
	keyrate.Limit{Rate: 10, Per: 10 * time.Second}.Using(keyrate.SlidingLog),         // 4
	keyrate.Limit{Rate: 2, Per: time.Second}.Using(keyrate.SlidingLog),               // 5
	{Rate: 1, Per: 300 * time.Millisecond, Burst: 2},                                 // 6
	{Rate: 5, Per: time.Second, Burst: 8},                                            // 7
	keyrate.Limit{Rate: 4, Per: 100 * time.Millisecond}.Using(keyrate.FixedWindow),   // 8
	keyrate.Limit{Rate: 6, Per: 100 * time.Millisecond}.Using(keyrate.SlidingWindow), // 9
	keyrate.Limit{Rate: 20, Per: time.Hour}.Using(keyrate.FixedWindow),               // 10
	keyrate.Limit{Rate: 50, Per: time.Minute}.Using(keyrate.SlidingWindow),           // 11
	{Rate: 3, Per: 200 * time.Millisecond, Burst: 5},                                 // 12
	keyrate.PerSecond(3),                                                          // 13: a token interval of 1/3 s, not a whole number of ns
	{Rate: 7, Per: time.Minute, Burst: 7},                                         // 14
	keyrate.Limit{Rate: 5, Per: time.Second}.Using(keyrate.SlidingLog),            // 15
	keyrate.Limit{Rate: 4, Per: 100 * time.Millisecond}.Using(keyrate.SlidingLog), // 16
	{Rate: 2, Per: 100 * time.Millisecond, Burst: 3},                              // 17
	keyrate.Limit{Rate: 5, Per: 10 * time.Second}.Using(keyrate.SlidingWindow),    // 18
	keyrate.Limit{Rate: 8, Per: time.Minute}.Using(keyrate.FixedWindow),           // 19
}

// carrySlots are the names of the policies an input builds, the default
// first; a key under slot 0 is under its member's default.
var carrySlots = [...]string{keyrate.DefaultPolicy, "p1", "p2", "p3", "p4"}

// carryKeys are the keys an input spends on.
var carryKeys = []string{"a", "b", "c"}

// carrySteps are the clock's steps: an advance is one of them times 1 to 4.
var carrySteps = []time.Duration{0, time.Microsecond, time.Millisecond, 7 * time.Millisecond,
	50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, 999 * time.Millisecond, time.Second, 1500 * time.Millisecond,
	10 * time.Second, 59 * time.Second, time.Minute, time.Hour}

// carryWaits are a reservation's maximum waits.
var carryWaits = []time.Duration{0, time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond,
	time.Second, 10 * time.Second, time.Minute, time.Hour, math.MaxInt64}

// The operations of an input, each 4 bytes (kind, who, cost, arg; a
// SetPolicy has 4 more, a policy spec): see CarryModel.
const (
	opAllowN = iota
	opAllowTier
	opPeek
	opRefund
	opReserve
	opCancel
	opSetPolicy
	opSweep
	opAdvance
	opMove
	opWait
	opKinds
)

// carryHeader is the length of an input's header: a flags byte, a policy
// spec for each of carrySlots and one for CarrySetup.Alt.
const carryHeader = 1 + 4*len(carrySlots) + 4

// carryMaxOps bounds the operations of one input.
const carryMaxOps = 80

// carryCost decodes a cost: 0 is 0, 127 is −1, 1 to 126 are 1 to 6, 128
// and up are 0 to 127.
func carryCost(b byte) int {
	switch {
	case b == 0:
		return 0
	case b == 127:
		return -1
	case b < 128:
		return 1 + int(b)%6
	}
	return int(b) - 128
}

// carryPolicy decodes a policy spec [n, a, b, c]: n%4 limits (0:
// unlimited, or 1 if unlimited is not allowed) from CarryLimits[a], [b],
// [c]. With logs, a log first makes the policy that log alone, and a log
// later is dropped; without, a log is the sliding window of its Rate and
// Per.
func carryPolicy(name string, spec []byte, logs, unlimited bool) keyrate.Policy {
	n := int(spec[0] % 4)
	if n == 0 {
		if unlimited {
			return keyrate.Unlimited(name)
		}
		n = 1
	}
	var ls []keyrate.Limit
	for _, b := range spec[1 : 1+n] {
		l := CarryLimits[int(b)%len(CarryLimits)]
		switch {
		case l.Algorithm != keyrate.SlidingLog:
		case !logs:
			l.Algorithm = keyrate.SlidingWindow
		case len(ls) == 0:
			return keyrate.Policy{Name: name, Limits: []keyrate.Limit{l}}
		default:
			continue
		}
		ls = append(ls, l)
	}
	return keyrate.Policy{Name: name, Limits: ls}
}

// carryAdmission is one admission of a key: cost at the reading (or a
// reservation's slot) at, decided by the key's request req.
type carryAdmission struct {
	at   time.Duration
	cost int64
	req  int
}

// carryBook is one key's record for the interval bounds: its admissions
// (net of refunds, taken off the latest, and cancels), the limits of each
// of its requests that was decided under a limited policy, and the cost
// of its reservations pending across a move (the documented exception:
// carry.md, "The exceptions that remain").
type carryBook struct {
	adm   []carryAdmission
	reqs  [][]keyrate.Limit
	extra int64
}

// carryReservation is a reservation CarryModel holds: every store's, the
// model's state of its key before (after the carry, if any) and after it,
// and what became of it.
type carryReservation struct {
	rs            []keyrate.Reservation
	key           string
	cost          int64
	slot          time.Duration
	before, after *mKey
	adm           int // index in the key's admissions
	cancelled     bool
	crossed       bool // pending when its key moved: counted in its book's extra
}

// carryPeek is the last Peek of a key: Remaining at reading at, by
// member, under limits.
type carryPeek struct {
	at        time.Duration
	member    int
	limits    []keyrate.Limit
	remaining int
}

// carryRun is one run of CarryModel.
type carryRun struct {
	t        *testing.T
	stores   []CarryStore
	clk      *clock.Manual
	m        *exact
	pols     []map[string]keyrate.Policy // by member, by name
	policyOf map[string]string
	books    map[string]*carryBook
	resv     []*carryReservation
	peeks    map[string]*carryPeek
	logs     bool          // the run's policies may hold logs (CarrySetup.Logs)
	start    time.Duration // the clock's first reading
	trace    []string
	// allowed counts the requests the model allowed; denied, those of
	// them the store denied (a store may be more conservative).
	allowed, denied int
}

// CarryModel decodes data into a setup and up to 80 operations, opens
// the stores with open, and makes every operation on every store, on
// three keys, checking each store against an independent exact model of
// keyrate's decisions and of docs/design/carry.md's carry rule (see
// carrymodel.go):
//
//   - every admission (AllowN, AllowTier, Wait returning nil, a
//     reservation at its slot) is one the model allows; a store may deny
//     what the model allows (carry.md, "What it costs"), and in verbose
//     mode CarryModel logs how often it did;
//   - Remaining (of a decision or a Peek) is never above the model's, nor
//     does a Peek report a cost-1 request allowed that the model denies;
//   - two Peeks of a key at one reading under one policy, with no refund
//     or cancel between, never report more the second time: a round trip
//     P → Q → P at one instant mints nothing;
//   - a Cancel gives back only a reservation the model can undo: its
//     slot not come, not given back before, the key's state what the
//     reservation left;
//   - over every interval, each key's admissions (net of refunds and
//     cancels) keep every token-bucket limit's bound, Burst + Rate·T/Per,
//     where every request in the interval was under a policy with that
//     limit, and the loose bound of carry.md's invariant (the largest
//     Burst, 2N for a window algorithm or a log, of the policies of the
//     interval's requests, plus the fastest of their rates times T), each
//     plus the cost of the key's reservations pending across a move;
//   - errors are those the model predicts, and all stores decide every
//     call alike.
//
// The model records only what the stores admitted, so it never runs
// ahead of them. The clock moves forwards only (the documented exception
// of a clock stepped back is left out), by whole µs. Wait is called with
// a context whose deadline has passed but which is not done, so that it
// never sleeps: it returns nil at once or an error wrapping
// keyrate.ErrWaitExceedsDeadline.
//
// The input is a header (carryHeader bytes: flags, bit 0 for logs; a
// policy spec [n, a, b, c] for each of the default and p1 to p4, and one
// for CarrySetup.Alt) and operations of 4 bytes [kind, who, cost, arg]:
// who picks the key (who%3), the member ((who/3)%2) and a policy slot
// ((who/6)%5); kind%11 is one of AllowN, AllowTier, Peek, Refund
// (arg odd: RefundTier), Reserve (maximum wait carryWaits[arg%9]; arg ≥
// 128: ReserveTier), Cancel (of reservation arg), SetPolicy (the slot's
// policy reversed, arg even, or arg odd the policy spec of the next 4
// bytes, which it consumes either way), Sweep, the clock's advance
// (carrySteps[arg%16] times 1 + (arg/16)%4), a move of the key to slot
// arg%5 by its policy function, and Wait (arg odd: WaitTier). NewCarryInput
// builds inputs readably.
func CarryModel(t *testing.T, data []byte, open OpenCarryModel) {
	if len(data) < carryHeader {
		return
	}
	logs := data[0]&1 == 1
	policyOf := map[string]string{}
	var setup CarrySetup
	setup.Logs = logs
	for i, name := range carrySlots {
		setup.Policies = append(setup.Policies, carryPolicy(name, data[1+4*i:5+4*i], logs, i > 0))
	}
	setup.Alt = carryPolicy(keyrate.DefaultPolicy, data[carryHeader-4:carryHeader], logs, false)
	setup.PolicyOf = func(key string) string { return policyOf[key] }
	// About today's Unix time (redisbucket's time source reads it as such),
	// and not a multiple of any window: an in-process store's windows are
	// aligned to it, redisbucket's to 0.
	const start = 56*365*24*time.Hour + 123456*time.Microsecond
	setup.Clock = clock.NewManual(start)
	stores := open(t, setup)
	if len(stores) == 0 {
		t.Fatal("the opener returned no store")
	}
	for _, s := range stores[1:] {
		if len(s.Members) != len(stores[0].Members) || s.Origin != stores[0].Origin {
			t.Fatalf("%s and %s differ in members or origin: CarryModel compares them", s.Name, stores[0].Name)
		}
	}
	r := &carryRun{t: t, stores: stores, clk: setup.Clock, m: newExact(stores[0].Origin), policyOf: policyOf,
		books: map[string]*carryBook{}, peeks: map[string]*carryPeek{}, logs: logs, start: start}
	for mem := range stores[0].Members {
		ps := map[string]keyrate.Policy{}
		for _, p := range setup.Policies {
			ps[p.Name] = p
		}
		if mem == 1 {
			ps[keyrate.DefaultPolicy] = setup.Alt
		}
		r.pols = append(r.pols, ps)
	}
	for i, p := range setup.Policies {
		r.trace = append(r.trace, fmt.Sprintf("policy %d: %v", i, p))
	}
	if len(stores[0].Members) > 1 {
		r.trace = append(r.trace, fmt.Sprintf("member 1's default: %v", setup.Alt))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the run (readings from the start, %v):\n%s", start, strings.Join(r.trace, "\n"))
		}
	})
	ops := 0
	for b := data[carryHeader:]; len(b) >= 4 && ops < carryMaxOps; ops++ {
		op := b[:4]
		b = b[4:]
		var spec []byte
		if op[0]%opKinds == opSetPolicy {
			if len(b) < 4 {
				break
			}
			spec, b = b[:4], b[4:]
		}
		r.step(ops, op, spec)
	}
	if testing.Verbose() && r.allowed > 0 {
		t.Logf("%d of %d requests the model allowed were denied (%.1f%%)", r.denied, r.allowed, 100*float64(r.denied)/float64(r.allowed))
	}
}

// member returns the member an operation's who byte picks.
func (r *carryRun) member(who byte) int { return int(who/3) % len(r.stores[0].Members) }

// policy returns the policy named name (slot 0, "", the default) for member.
func (r *carryRun) policy(member int, name string) keyrate.Policy {
	if name == "" {
		name = keyrate.DefaultPolicy
	}
	return r.pols[member][name]
}

// tier returns store s's member's handle on the policy named name.
func (r *carryRun) tier(s, member int, name string) keyrate.Tier {
	tier, err := r.stores[s].Members[member].Tier(name)
	if err != nil {
		r.t.Fatalf("%s member %d: Tier(%q): %v", r.stores[s].Name, member, name, err)
	}
	return tier
}

// book returns key's book.
func (r *carryRun) book(key string) *carryBook {
	b := r.books[key]
	if b == nil {
		b = &carryBook{}
		r.books[key] = b
	}
	return b
}

// fail fails the run, naming the operation.
func (r *carryRun) fail(i int, format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("op %d at %v: %s", i, r.clk.Now()-r.start, fmt.Sprintf(format, args...))
}

// carryErrors are the errors CarryModel tells apart.
var carryErrors = []error{keyrate.ErrInvalidCost, keyrate.ErrCostExceedsBurst, keyrate.ErrUnsupportedAlgorithm,
	keyrate.ErrWaitExceedsDeadline, keyrate.ErrUnknownPolicy, keyrate.ErrStoreFull, keyrate.ErrInvalidPolicy}

// carryErr names which of carryErrors err wraps ("" for nil).
func carryErr(err error) string {
	if err == nil {
		return ""
	}
	for _, e := range carryErrors {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "other: " + err.Error()
}

// predict returns the error the model expects of a request of cost under
// p ("" for none): a reservation (or Wait) refuses a log, and a window
// algorithm where the store cannot reserve under one.
func (r *carryRun) predict(p keyrate.Policy, cost int, reserve bool) string {
	if cost < 1 {
		return carryErr(keyrate.ErrInvalidCost)
	}
	if p.Unlimited {
		return ""
	}
	least := math.MaxInt
	for _, l := range p.Limits {
		least = min(least, int(burst(l)))
	}
	if cost > least {
		return carryErr(keyrate.ErrCostExceedsBurst)
	}
	if reserve {
		for _, l := range p.Limits {
			if l.Algorithm == keyrate.SlidingLog || isWindow(l) && !r.stores[0].WindowReservations {
				return carryErr(keyrate.ErrUnsupportedAlgorithm)
			}
		}
	}
	return ""
}

// pastDeadline is a context whose deadline has passed but which is not
// done: a Wait under it has no time to wait (tick.WaitBudget reads 0)
// and so never sleeps, deterministically, where a context really past
// its deadline would return ctx.Err() before deciding anything.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Unix(0, 0), true }

// outcome is one store's answer to a request.
type outcome struct {
	d   keyrate.Decision
	res keyrate.Reservation
	ok  bool // admitted
	at  time.Duration
	err error
}

// same reports whether two stores answered a request alike.
func (o outcome) same(p outcome) bool {
	return o.d == p.d && o.ok == p.ok && o.at == p.at && carryErr(o.err) == carryErr(p.err) &&
		o.res.OK() == p.res.OK() && o.res.At() == p.res.At() && o.res.Delay() == p.res.Delay()
}

func (o outcome) String() string {
	if o.err != nil {
		return "error " + o.err.Error()
	}
	if o.res.Key() != "" {
		return fmt.Sprintf("reservation OK %v at %v delay %v", o.res.OK(), o.res.At(), o.res.Delay())
	}
	return fmt.Sprintf("admitted %v %+v", o.ok, o.d)
}

// step makes operation i, op, on every store (spec: a SetPolicy's policy
// spec) and checks it.
func (r *carryRun) step(i int, op, spec []byte) {
	start := r.start
	kind := op[0] % opKinds
	key := carryKeys[int(op[1])%len(carryKeys)]
	mem := r.member(op[1])
	slot := carrySlots[int(op[1]/6)%len(carrySlots)]
	cost := carryCost(op[2])
	arg := op[3]
	now := r.clk.Now()
	via := ""
	if len(r.stores[0].Members) > 1 {
		via = fmt.Sprintf(" via member %d", mem)
	}
	line := func(s string) { r.trace = append(r.trace, fmt.Sprintf("op %d at %v%s: %s", i, now-start, via, s)) }
	switch kind {
	case opAllowN, opAllowTier, opReserve, opWait:
		tiered := kind == opAllowTier || kind == opReserve && arg >= 128 || kind == opWait && arg%2 == 1
		name := r.policyOf[key]
		if tiered {
			name = slot
		}
		p := r.policy(mem, name)
		wait := carryWaits[int(arg&127)%len(carryWaits)]
		var what string
		switch kind {
		case opAllowN:
			what = fmt.Sprintf("AllowN(%s, %d) under %q", key, cost, p.Name)
		case opAllowTier:
			what = fmt.Sprintf("AllowTier(%s, %q, %d)", key, p.Name, cost)
		case opReserve:
			what = fmt.Sprintf("Reserve(%s, %d, %v) under %q (tier %v)", key, cost, wait, p.Name, tiered)
		default:
			what = fmt.Sprintf("Wait(%s, %d) under %q (tier %v)", key, cost, p.Name, tiered)
		}
		outs := make([]outcome, len(r.stores))
		for s := range r.stores {
			l := r.stores[s].Members[mem]
			var tier keyrate.Tier
			if tiered {
				tier = r.tier(s, mem, p.Name)
			}
			o := &outs[s]
			o.at = now
			switch {
			case kind == opAllowN:
				o.d, o.err = l.AllowN(key, cost)
				o.ok = o.err == nil && o.d.Allowed
			case kind == opAllowTier:
				o.d, o.err = l.AllowTier(key, tier, cost)
				o.ok = o.err == nil && o.d.Allowed
			case kind == opReserve && tiered:
				o.res, o.err = l.ReserveTier(key, tier, cost, wait)
			case kind == opReserve:
				o.res, o.err = l.Reserve(key, cost, wait)
			case tiered:
				o.err = l.WaitTier(pastDeadline{context.Background()}, key, tier, cost)
			default:
				o.err = l.Wait(pastDeadline{context.Background()}, key, cost)
			}
			if kind == opReserve && o.err == nil {
				o.ok, o.at = o.res.OK(), o.res.At()
				if o.res.Delay() < 0 || o.at < now || o.ok && o.res.Delay() > wait || !o.ok && o.res.Delay() <= wait && o.res.Delay() > 0 {
					r.fail(i, "%s: %s: %s, against a maximum wait of %v", what, r.stores[s].Name, o, wait)
				}
			}
			if kind == opWait {
				o.ok = o.err == nil
				if errors.Is(o.err, keyrate.ErrWaitExceedsDeadline) {
					o.err = nil // a denial
				}
			}
		}
		line(fmt.Sprintf("%s: %s", what, outs[0]))
		r.request(i, what, key, mem, p, cost, kind == opReserve || kind == opWait, outs)
	case opPeek:
		p := r.policy(mem, r.policyOf[key])
		ds := make([]keyrate.Decision, len(r.stores))
		for s := range r.stores {
			ds[s] = r.stores[s].Members[mem].Peek(key)
			if ds[s] != ds[0] {
				r.fail(i, "Peek(%s): %s = %+v; %s = %+v", key, r.stores[s].Name, ds[s], r.stores[0].Name, ds[0])
			}
		}
		line(fmt.Sprintf("Peek(%s) under %q: %+v", key, p.Name, ds[0]))
		r.peek(i, key, mem, p, ds[0])
	case opRefund:
		name := r.policyOf[key]
		tiered := arg%2 == 1
		if tiered {
			name = slot
		}
		p := r.policy(mem, name)
		errs := make([]error, len(r.stores))
		for s := range r.stores {
			l := r.stores[s].Members[mem]
			if tiered {
				errs[s] = l.RefundTier(key, r.tier(s, mem, p.Name), cost)
			} else {
				errs[s] = l.Refund(key, cost)
			}
		}
		line(fmt.Sprintf("Refund(%s, %d) under %q (tier %v): %v", key, cost, p.Name, tiered, errs[0]))
		r.refund(i, key, p, cost, errs)
	case opCancel:
		if len(r.resv) == 0 {
			line("Cancel: no reservation")
			return
		}
		n := int(arg) % len(r.resv)
		h := r.resv[n]
		got := make([]bool, len(r.stores))
		for s := range r.stores {
			got[s] = h.rs[s].Cancel()
		}
		line(fmt.Sprintf("Cancel of reservation %d (%s, cost %d, slot %v): %v", n, h.key, h.cost, h.slot-start, got[0]))
		r.cancel(i, h, got)
	case opSetPolicy:
		name := slot
		cur := r.pols[mem][name]
		var p keyrate.Policy
		if arg%2 == 0 {
			p = keyrate.Policy{Name: name, Limits: slices.Clone(cur.Limits), Unlimited: cur.Unlimited}
			slices.Reverse(p.Limits)
		} else {
			p = carryPolicy(name, spec, r.logs, name != keyrate.DefaultPolicy)
		}
		line(fmt.Sprintf("SetPolicy(%v)", p))
		members := []int{mem}
		if name != keyrate.DefaultPolicy {
			members = members[:0]
			for m := range r.stores[0].Members {
				members = append(members, m)
			}
		}
		for _, m := range members {
			for s := range r.stores {
				if err := r.stores[s].Members[m].SetPolicy(p); err != nil {
					r.fail(i, "%s member %d: SetPolicy(%v): %v", r.stores[s].Name, m, p, err)
				}
			}
			r.pols[m][name] = p
		}
	case opSweep:
		line("Sweep")
		for _, s := range r.stores {
			if s.Sweep != nil {
				s.Sweep()
			}
		}
	case opAdvance:
		d := carrySteps[int(arg)%len(carrySteps)] * time.Duration(1+int(arg/16)%4)
		line(fmt.Sprintf("Advance(%v)", d))
		r.clk.Advance(d)
	case opMove:
		to := carrySlots[int(arg)%len(carrySlots)]
		if to == keyrate.DefaultPolicy {
			to = ""
		}
		line(fmt.Sprintf("move %s to %q", key, to))
		r.policyOf[key] = to
	}
}
