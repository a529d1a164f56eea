package rules

import (
	"math/bits"
	"sort"
	"time"

	"github.com/keyrate/keyrate"
)

// This file is the sliding-window log (keyrate.SlidingLog): the one
// algorithm that does not fit the 64-bit State. A key's log is a ring of
// its admissions within the last window, each kept as the tick it leaves
// the window and a running total of the cost, allocated with the key's
// bucket (up to keyrate.MaxLogRate entries), and a policy that counts with
// it has exactly one window.
//
// A log policy's key also has LogWords states, its summary, which travel
// by value wherever a store copies a key's states (a decision built after
// the lock is let go, Peek, a sweep, a change of policy):
//
//	s[0] te:     the latest tick the log has seen (its clock: time never
//	             goes backwards for a key, as a token bucket's TAT)
//	s[1] used:   the cost admitted in (te − W, te]
//	s[2] full:   the tick from which the log is as a new key's: empty
//	             (its newest entry has left), and its clock not ahead
//	s[3] retry:  the earliest tick at which the summary's request (of the
//	             cost of the spend that wrote it, 1 for a Peek's) fits
//
// The summary read alone is the log with every admission collapsed onto
// its newest entry, leaving the window at full: it never holds less than
// the log (a conservative view), and it equals the log when the log has at
// most one entry, as the log of a new key after its first request has.
// The stores that keep a log (mutexbucket, striped, by way of sweep.Block)
// call LogSpend, LogRefund and LogView on the log itself under the key's
// lock; every other method reads the summary.
//
// A request read at tick t is decided at te' = max(te, t): a reading older
// than one the key has seen (a stale one, or a clock stepped back) is
// decided as if made at te, where the log counts at least as much as at
// any later tick, and its admission leaves the window at te' + W (or with
// the newest entry, if that leaves later, after a change of policy): the
// ring stays in order and no reading, however stale, lets an entry out
// early. A store's floor (FullStates) reads as a log that admits nothing
// before the floor, as though N had been admitted W before it: an evicted
// log admitted no more there, so eviction only ever denies more.

// LogWords is the number of states a keyrate.SlidingLog policy's key
// has: the summary of its log (see Rules.Len).
const LogWords = 4

// Log is one key's sliding-window log: the ticks and costs of its
// admissions still within the window, oldest first, in a ring of N
// entries (an entry costs at least 1, so N entries always suffice).
// Admissions at one tick share an entry. The zero Log is not usable: a
// store gets one from Rules.NewLog with the key's bucket. A Log is not
// safe for concurrent use: the store guards it with the key's lock.
type Log struct {
	exit []uint64 // the tick each entry leaves the window (its tick + W), a ring of N
	cum  []uint32 // running total of the cost through each entry, mod 2^32
	head int      // the oldest entry
	n    int      // the entries
	base uint32   // the running total before head
	te   uint64   // the latest tick the log has seen
}

// IsLog reports whether the policy counts with keyrate.SlidingLog: its key then
// needs a Log (NewLog) beside its LogWords states.
func (rs *Rules) IsLog() bool { return rs.log }

// NewLog returns an empty log for a key of the log policy rs, allocating
// its ring, with the summary s (a new key's, or one carried from another
// policy: LogWords states) written into it if s is not nil. It returns nil
// if rs is not a log policy.
func (rs *Rules) NewLog(s []State) *Log {
	if !rs.log {
		return nil
	}
	n := rs.rules[0].n
	l := &Log{exit: make([]uint64, n), cum: make([]uint32, n)}
	if s != nil {
		rs.SeedLog(l, s)
	}
	return l
}

// SeedLog sets the log l to the summary s, forgetting what it held (a new
// key's log: from the store's floor, or carried from another policy): its
// clock, and its cost as one entry leaving the window at full.
func (rs *Rules) SeedLog(l *Log, s []State) {
	p := &rs.rules[0]
	l.head, l.n, l.base, l.te = 0, 0, 0, uint64(s[0])
	if used, full := uint64(s[1]), uint64(s[2]); used > 0 && full > l.te { // used may exceed N: see carryLog
		p.push(l, full, used)
	}
}

// LogSpend is Reserve for a log policy's key, on its log l, at reading t:
// it spends cost if the log has room for it (a log never waits), and
// writes the log's summary after the call into s (LogWords states, its
// retry for cost). It returns Rules.Take's result. cost must satisfy
// CheckCost.
func (rs *Rules) LogSpend(l *Log, t time.Duration, cost int, s []State) (denied int) {
	p := &rs.rules[0]
	p.advance(l, p.Ticks(t))
	c := uint64(cost)
	denied = 0
	if l.used()+c <= p.n {
		p.push(l, l.te+p.win, c)
		denied = -1
	}
	p.summary(l, l.fullAt(), c, s)
	return denied
}

// LogRefund gives cost back to the log l at reading t, off its newest
// admissions still in the window (a spend and a refund of its cost leave
// the log as it was), and writes its summary into s. A log that counts
// more than N (a debt carried from another policy) gives nothing back, as
// a token bucket owing more than its Burst does.
func (rs *Rules) LogRefund(l *Log, t time.Duration, cost int, s []State) {
	p := &rs.rules[0]
	p.advance(l, p.Ticks(t))
	for c := uint32(cost); c > 0 && l.n > 0 && l.used() <= p.n; {
		i := l.last()
		prev := l.base
		if l.n > 1 {
			prev = l.cum[l.idx(l.n-2)]
		}
		if e := l.cum[i] - prev; e > c {
			l.cum[i] -= c
			break
		} else {
			l.n--
			c -= e
		}
	}
	p.summary(l, l.fullAt(), 1, s)
}

// LogView writes the summary of the log l, as read at the later of its
// clock and a reading of the store's clock now, into s, with its retry
// for a cost of 1: what Peek, a sweep and a change of policy read (the
// tick from which it is as new stays that of the log's own clock). It
// changes nothing.
func (rs *Rules) LogView(l *Log, s []State) {
	p := &rs.rules[0]
	v := *l // a shallow copy: advance moves only head, n, base and te
	p.advance(&v, p.Now())
	p.summary(&v, l.fullAt(), 1, s)
}

// idx returns the ring index of the log's entry k, counting from the
// oldest.
func (l *Log) idx(k int) int {
	i := l.head + k
	if i >= len(l.exit) {
		i -= len(l.exit)
	}
	return i
}

// last returns the ring index of the newest entry; the log must have one.
func (l *Log) last() int { return l.idx(l.n - 1) }

// used returns the cost of the entries.
func (l *Log) used() uint64 {
	if l.n == 0 {
		return 0
	}
	return uint64(l.cum[l.last()] - l.base)
}

// advance moves the log's clock to now if that is later, and drops the
// entries that have left the window (tick + W ≤ the clock).
func (p *Rule) advance(l *Log, now uint64) {
	l.te = max(l.te, now)
	for l.n > 0 && l.exit[l.head] <= l.te {
		l.base = l.cum[l.head]
		l.head = l.idx(1)
		l.n--
	}
}

// push logs an admission of cost c leaving the window at tick exit, or
// with the newest entry if that leaves it later (the entry is then
// shared): the ring stays in order. The log must have room: its cost plus
// c at most N.
func (p *Rule) push(l *Log, exit, c uint64) {
	prev := l.base
	if l.n > 0 {
		i := l.last()
		prev = l.cum[i]
		if l.exit[i] >= exit {
			l.cum[i] += uint32(c)
			return
		}
	}
	i := l.idx(l.n)
	l.exit[i], l.cum[i] = exit, prev+uint32(c)
	l.n++
}

// retry returns the earliest tick, not before the log's clock, at which
// cost c fits in the log if nothing else spends: when enough of its oldest
// entries have left the window.
func (p *Rule) retry(l *Log, c uint64) uint64 {
	used := l.used()
	if used+c <= p.n {
		return l.te
	}
	need := uint32(used + c - p.n) // ≤ used: c ≤ N
	k := sort.Search(l.n, func(k int) bool { return l.cum[l.idx(k)]-l.base >= need })
	return l.exit[l.idx(k)]
}

// fullAt returns the tick from which the log is as a new key's: its
// newest entry has left the window, and its clock is not ahead.
func (l *Log) fullAt() uint64 {
	if l.n == 0 {
		return l.te // every entry left at or before te
	}
	return max(l.te, l.exit[l.last()])
}

// summary writes the log's summary into s, with its retry for cost c and
// full as the tick it is as new from.
func (p *Rule) summary(l *Log, full, c uint64, s []State) {
	s[0], s[1], s[2], s[3] = State(l.te), State(l.used()), State(full), State(p.retry(l, c))
}

// The summary read alone (see the top of the file).

// logView returns the summary s as seen at tick now: the clock te', the
// cost counted there (none once the collapsed entry has left the window)
// and the tick the log is empty from.
func (p *Rule) logView(s []State, now uint64) (te, used, full uint64) {
	te, used, full = max(uint64(s[0]), now), uint64(s[1]), uint64(s[2])
	if full <= te {
		used = 0
	}
	return te, used, full
}

// logSummary writes the summary of a log whose admissions are collapsed
// onto one entry of cost used ending at full, seen at te, with its retry
// for cost c.
func (p *Rule) logSummary(s []State, te, used, full, c uint64) {
	retry := te
	if used+c > p.n {
		retry = full
	}
	s[0], s[1], s[2], s[3] = State(te), State(used), State(max(full, te)), State(retry)
}

// logFullStates writes into s the summary of a log as new from tick now
// on (the floor of a store that evicted keys full at now): one that
// admits nothing before now, as though N had been admitted W before it
// (an evicted log admitted no more there), and from now on is a new
// key's, its clock whatever the reading is.
func (p *Rule) logFullStates(now uint64, s []State) {
	s[0], s[1], s[2], s[3] = 0, State(p.n), State(now), State(now)
}

// logTake is Take on the summary s alone, exact for a log of at most one
// entry (a new key's): see the top of the file.
func (p *Rule) logTake(s []State, now uint64, cost int) bool {
	te, used, full := p.logView(s, now)
	c := uint64(cost)
	if used+c > p.n {
		p.logSummary(s, te, used, full, c)
		return false
	}
	p.logSummary(s, te, used+c, max(full, te+p.win), c)
	return true
}

// logRefund is Refund on the summary s alone: nothing while it counts
// more than N (see LogRefund).
func (p *Rule) logRefund(s []State, now uint64, cost int) {
	te, used, full := p.logView(s, now)
	if used > p.n {
		p.logSummary(s, te, used, full, 1)
		return
	}
	used -= min(used, uint64(cost))
	if used == 0 {
		full = te
	}
	p.logSummary(s, te, used, full, 1)
}

// logDecide is Decide for a log policy, from the summary s a spend (or a
// view) wrote at a tick at or after now.
func (p *Rule) logDecide(s []State, now uint64, cost int, allowed bool) keyrate.Decision {
	te, used, full := p.logView(s, now)
	reset := p.duration(sub0(full, now))
	d := keyrate.Decision{
		Allowed:          allowed,
		Policy:           p.policy,
		Limit:            p.limit,
		Remaining:        int(p.n - min(used, p.n)),
		ResetAfter:       reset,
		WindowResetAfter: reset,
	}
	if !allowed {
		retry := uint64(s[3])
		if te > uint64(s[0]) || retry < te { // a summary older than now: its own retry no longer holds
			retry = te
			if used+uint64(cost) > p.n {
				retry = full
			}
		}
		d.RetryAfter = p.duration(sub0(retry, now))
	}
	return d
}

// maxLogDebt is the most cost a log's entry carries from another policy:
// its ring counts cost mod 2^32.
const maxLogDebt = 1 << 31

// logCarry writes into s, LogWords states of the log rule p at tick now,
// the summary of a key that owes debt tokens, counted as spent at now (the
// debt in of Rules.Carry): one admission of the debt at now, which stays
// in the window until now + ⌈debt/N⌉·W, so that the debt leaves the log no
// sooner than it would spent N a window. The debt is kept whole (up to
// maxLogDebt), above N if the old state owed more: a log carried back then
// owes it all again.
func (p *Rule) logCarry(debt, now uint64, s []State) {
	if debt == 0 {
		p.logSummary(s, now, 0, now, 1)
		return
	}
	debt = min(debt, maxLogDebt)
	hi, stay := bits.Mul64((debt+p.n-1)/p.n, p.win)
	if hi != 0 || stay > maxTicks {
		stay = maxTicks // past the clock range, where time stops
	}
	p.logSummary(s, now, debt, now+stay, 1)
}
