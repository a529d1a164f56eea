package keyrateprom

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/isnil"
)

// MaxPolicies is the most policy label values a Metrics keeps; events for
// any further policy name are counted under the label value Other.
const MaxPolicies = 64

// MaxUnknownPolicies is the most of the MaxPolicies policy label values
// that names a store lacks (events with keyrate.ErrUnknownPolicy) may
// take; any further such name is counted under Other. Such a name can be
// a client's choice (a store's WithPolicyFunc that reads the client's
// key), and must not crowd out the policies the store has.
const MaxUnknownPolicies = MaxPolicies / 2

// MaxPolicyLabel is the longest policy label value, in bytes: a longer
// name is labelled with its first bytes and "...", so that a name from a
// client's key cannot make every scrape carry it in each of a policy's
// series.
const MaxPolicyLabel = 128

// Other is the policy label of events past MaxPolicies distinct names.
const Other = "other"

// Metrics counts the events of the stores or middleware it observes and
// exposes them as Prometheus metrics (see the package documentation). It
// is a keyrate.Observer and a prometheus.Collector; it is safe for
// concurrent use. Create one with New.
type Metrics struct {
	decisions *prometheus.CounterVec // policy, decision
	shadow    *prometheus.CounterVec // policy
	cost      *prometheus.CounterVec // policy
	errs      *prometheus.CounterVec // policy, error
	degraded  *prometheus.CounterVec // policy, decision

	keysDesc, evictionsDesc, refusedDesc *prometheus.Desc

	policies *xsync.MapOf[string, *counters]
	mu       sync.Mutex // serialises adding a policy
	n        int        // policies added, under mu

	// watchMu guards the watched store and the totals its Stats add to.
	watchMu sync.Mutex
	watched *watched
	// evictions and refusals are keyrate_evictions_total's and
	// keyrate_refused_total's values: what the stores watched so far
	// counted while they were watched.
	evictions, refusals uint64
}

// Stater is what Watch reads at each scrape: the in-process stores (every
// keyrate.BoundedLimiter) are Staters.
type Stater interface {
	Stats() keyrate.Stats
}

// watched is the store a Metrics watches, and its Stats counts as last
// read, from which the next reading's increase is counted.
type watched struct {
	s                Stater
	evicted, refused uint64
}

// add adds to the Metrics' totals what st counts beyond w's last
// reading, and makes st the last reading. A count below the last (a
// Stater whose counts restarted) is all new.
func (m *Metrics) add(w *watched, st keyrate.Stats) {
	m.evictions += increase(st.Evictions, &w.evicted)
	m.refusals += increase(st.Refused, &w.refused)
}

// increase returns what now counts beyond *last, and sets *last to now.
func increase(now uint64, last *uint64) uint64 {
	d := now - *last
	if now < *last {
		d = now
	}
	*last = now
	return d
}

// error kinds, the values of keyrate_errors_total's error label.
const (
	errStoreFull = iota
	errUnknownPolicy
	errInvalidCost
	errInvalidKey
	errCanceled
	errUnsupported
	errBackend
	nErrKinds
)

var errKindNames = [nErrKinds]string{"store_full", "unknown_policy", "invalid_cost", "invalid_key", "canceled", "unsupported", "backend"}

// counters are one policy's children of the vectors, created when the
// policy is first seen so that Observe does no label lookup.
type counters struct {
	allowed, denied, shadowDenied, cost prometheus.Counter
	degradedAllowed, degradedDenied     prometheus.Counter
	errs                                [nErrKinds]prometheus.Counter
}

// New returns a Metrics whose every metric has the constant label
// store=name. An empty name is allowed (the label is then empty), and so
// are several Metrics in one registry as long as their names differ.
func New(name string) *Metrics {
	cl := prometheus.Labels{"store": name}
	counter := func(metric, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "keyrate", Name: metric, Help: help, ConstLabels: cl,
		}, labels)
	}
	return &Metrics{
		decisions: counter("decisions_total",
			"Rate-limit decisions, by policy and decision (allowed or denied).", "policy", "decision"),
		shadow: counter("shadow_denied_total",
			"Denials that shadow mode let through, by policy.", "policy"),
		cost: counter("cost_allowed_total",
			"Cost (tokens) allowed, by policy.", "policy"),
		errs: counter("errors_total",
			"Calls that ended in an error instead of a decision, by policy and kind.", "policy", "error"),
		degraded: counter("degraded_total",
			"Decisions a failure policy made instead of the store, by policy and decision.", "policy", "decision"),
		keysDesc: prometheus.NewDesc("keyrate_keys",
			"Keys the store tracks now.", nil, cl),
		evictionsDesc: prometheus.NewDesc("keyrate_evictions_total",
			"Buckets the store evicted because they were full.", nil, cl),
		refusedDesc: prometheus.NewDesc("keyrate_refused_total",
			"New keys the store refused because it tracked its maximum.", nil, cl),
		policies: xsync.NewMapOf[string, *counters](),
	}
}

// Watch makes each scrape read s.Stats() for keyrate_keys,
// keyrate_evictions_total and keyrate_refused_total. A later Watch replaces
// the store watched; a nil s stops watching. A typed nil (such as a nil
// *atomicbucket.Store), whose Stats would panic at the scrape, is refused
// with an error and changes nothing.
//
// The two counters count what the stores did while they were watched,
// from the Watch call on: they start at 0 in a new Metrics, a store
// watched later adds its evictions and refusals from then, and one
// replaced by a later Watch (or by nil) keeps what it added, read once
// more at the switch. So neither counter ever goes backwards, as
// Prometheus requires of a counter, and a store watched twice is not
// counted twice.
func (m *Metrics) Watch(s Stater) error {
	if !m.made() {
		return errors.New("keyrateprom: Watch: a Metrics not made by New")
	}
	if s != nil && isnil.Is(s) {
		return fmt.Errorf("keyrateprom: Watch: a nil %T", s)
	}
	m.watchMu.Lock()
	defer m.watchMu.Unlock()
	if w := m.watched; w != nil {
		m.add(w, w.s.Stats())
	}
	m.watched = nil
	if s != nil {
		st := s.Stats()
		m.watched = &watched{s: s, evicted: st.Evictions, refused: st.Refused}
	}
	return nil
}

// made reports whether m was made by New: a nil or zero Metrics, which
// has no counters, is one that every method leaves alone.
func (m *Metrics) made() bool { return m != nil && m.policies != nil }

// Observe counts e. It is the keyrate.Observer method. A Metrics not
// made by New (nil, or the zero value) counts nothing.
func (m *Metrics) Observe(e keyrate.Event) {
	if !m.made() {
		return
	}
	c := m.counters(e.Policy, e.Err)
	if e.Degraded {
		if e.Allowed {
			c.degradedAllowed.Inc()
		} else {
			c.degradedDenied.Inc()
		}
	}
	switch {
	case e.Err != nil:
		c.errs[errKind(e.Err)].Inc()
	case e.Allowed:
		c.allowed.Inc()
		if e.Cost > 0 {
			c.cost.Add(float64(e.Cost))
		}
	default:
		c.denied.Inc()
		if e.Shadow {
			c.shadowDenied.Inc()
		}
	}
}

// counters returns policy's counters, creating them on first sight, and
// Other's once MaxPolicies names have been seen, or MaxUnknownPolicies
// for a name the store lacks (err is keyrate.ErrUnknownPolicy).
func (m *Metrics) counters(policy string, err error) *counters {
	if c, ok := m.policies.Load(policy); ok {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.policies.Load(policy); ok {
		return c
	}
	// A name from a client's key, through a store's WithPolicyFunc, can
	// be any bytes, of any length: such a name is kept under its label,
	// so that the map holds no long name, and its events take this path.
	key, label := policy, policyLabel(policy)
	if label != policy {
		if c, ok := m.policies.Load(label); ok {
			return c
		}
		key = label
	}
	most := MaxPolicies
	if errors.Is(err, keyrate.ErrUnknownPolicy) {
		most = MaxUnknownPolicies
	}
	if m.n >= most {
		if c, ok := m.policies.Load(Other); ok {
			return c
		}
		key, label = Other, Other
	}
	c := &counters{
		allowed:         m.decisions.WithLabelValues(label, "allowed"),
		denied:          m.decisions.WithLabelValues(label, "denied"),
		shadowDenied:    m.shadow.WithLabelValues(label),
		cost:            m.cost.WithLabelValues(label),
		degradedAllowed: m.degraded.WithLabelValues(label, "allowed"),
		degradedDenied:  m.degraded.WithLabelValues(label, "denied"),
	}
	for k, name := range errKindNames {
		c.errs[k] = m.errs.WithLabelValues(label, name)
	}
	m.policies.Store(key, c)
	if key != Other {
		m.n++
	}
	return c
}

// policyLabel returns the policy label value of the name policy: policy,
// with each byte sequence that is not UTF-8 replaced by U+FFFD
// (Prometheus refuses such a label value: WithLabelValues would panic),
// cut to its first MaxPolicyLabel bytes, "..." included, if longer.
func policyLabel(policy string) string {
	if !utf8.ValidString(policy) {
		policy = strings.ToValidUTF8(policy, "\uFFFD")
	}
	if len(policy) > MaxPolicyLabel {
		n := MaxPolicyLabel - len("...")
		for n > 0 && !utf8.RuneStart(policy[n]) {
			n--
		}
		policy = policy[:n] + "..." // a copy: the label holds no long name
	}
	return policy
}

func errKind(err error) int {
	switch {
	case errors.Is(err, keyrate.ErrStoreFull):
		return errStoreFull
	case errors.Is(err, keyrate.ErrUnknownPolicy):
		return errUnknownPolicy
	case errors.Is(err, keyrate.ErrInvalidCost), errors.Is(err, keyrate.ErrCostExceedsBurst):
		return errInvalidCost
	case errors.Is(err, keyrate.ErrInvalidKey):
		return errInvalidKey
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errCanceled
	case errors.Is(err, keyrate.ErrUnsupportedAlgorithm):
		return errUnsupported
	default:
		return errBackend
	}
}

// Describe is the prometheus.Collector method. A Metrics not made by
// New (nil, or the zero value) describes nothing: a registry takes it as
// an unchecked collector, and it collects nothing either. (A panic here
// would end the process: a registry calls Describe on a goroutine of its
// own.)
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	if !m.made() {
		return
	}
	m.decisions.Describe(ch)
	m.shadow.Describe(ch)
	m.cost.Describe(ch)
	m.errs.Describe(ch)
	m.degraded.Describe(ch)
	ch <- m.keysDesc
	ch <- m.evictionsDesc
	ch <- m.refusedDesc
}

// Collect is the prometheus.Collector method. A Metrics not made by New
// collects nothing.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	if !m.made() {
		return
	}
	m.decisions.Collect(ch)
	m.shadow.Collect(ch)
	m.cost.Collect(ch)
	m.errs.Collect(ch)
	m.degraded.Collect(ch)
	m.watchMu.Lock()
	defer m.watchMu.Unlock()
	if w := m.watched; w != nil {
		st := w.s.Stats()
		m.add(w, st)
		ch <- prometheus.MustNewConstMetric(m.keysDesc, prometheus.GaugeValue, float64(st.Keys))
		ch <- prometheus.MustNewConstMetric(m.evictionsDesc, prometheus.CounterValue, float64(m.evictions))
		ch <- prometheus.MustNewConstMetric(m.refusedDesc, prometheus.CounterValue, float64(m.refusals))
	}
}

var (
	_ keyrate.Observer     = (*Metrics)(nil)
	_ prometheus.Collector = (*Metrics)(nil)
)
