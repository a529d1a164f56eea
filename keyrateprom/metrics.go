package keyrateprom

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/metriclabel"
)

// MaxPolicies is the most policy label values a Metrics keeps; events for
// any further policy name are counted under the label value Other.
const MaxPolicies = metriclabel.MaxPolicies

// MaxUnknownPolicies is the most of the MaxPolicies policy label values
// that names a store lacks (events with keyrate.ErrUnknownPolicy) may
// take; any further such name is counted under Other. Such a name can be
// a client's choice (a store's WithPolicyFunc that reads the client's
// key), and must not crowd out the policies the store has.
const MaxUnknownPolicies = metriclabel.MaxUnknownPolicies

// MaxPolicyLabel is the longest policy label value, in bytes: a longer
// name is labelled with its first bytes and "...", so that a name from a
// client's key cannot make every scrape carry it in each of a policy's
// series.
const MaxPolicyLabel = metriclabel.MaxPolicyLabel

// Other is the policy label of events past MaxPolicies distinct names.
const Other = metriclabel.Other

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

	policies *metriclabel.Policies[counters]
	// watch is the store watched, and keyrate_evictions_total's and
	// keyrate_refused_total's values.
	watch metriclabel.Watch
}

// Stater is what Watch reads at each scrape: the in-process stores (every
// keyrate.BoundedLimiter) are Staters.
type Stater interface {
	Stats() keyrate.Stats
}

// counters are one policy's children of the vectors, created when the
// policy is first seen so that Observe does no label lookup.
type counters struct {
	allowed, denied, shadowDenied, cost prometheus.Counter
	degradedAllowed, degradedDenied     prometheus.Counter
	errs                                [metriclabel.NumErrorKinds]prometheus.Counter
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
	m := &Metrics{
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
	}
	m.policies = metriclabel.New(m.newCounters)
	return m
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
	if err := m.watch.Set(s); err != nil {
		return fmt.Errorf("keyrateprom: Watch: %w", err)
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
	c := m.policies.Get(e.Policy, e.Err)
	if e.Degraded {
		if e.Allowed {
			c.degradedAllowed.Inc()
		} else {
			c.degradedDenied.Inc()
		}
	}
	switch {
	case e.Err != nil:
		c.errs[metriclabel.KindOf(e.Err)].Inc()
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

// newCounters returns the children of the vectors for the policy label
// value label: m.policies makes them when it first sees the label, and
// Observe finds them there.
func (m *Metrics) newCounters(label string) *counters {
	c := &counters{
		allowed:         m.decisions.WithLabelValues(label, "allowed"),
		denied:          m.decisions.WithLabelValues(label, "denied"),
		shadowDenied:    m.shadow.WithLabelValues(label),
		cost:            m.cost.WithLabelValues(label),
		degradedAllowed: m.degraded.WithLabelValues(label, "allowed"),
		degradedDenied:  m.degraded.WithLabelValues(label, "denied"),
	}
	for k := range c.errs {
		c.errs[k] = m.errs.WithLabelValues(label, metriclabel.ErrorKind(k).String())
	}
	return c
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
	if keys, evictions, refusals, ok := m.watch.Read(); ok {
		ch <- prometheus.MustNewConstMetric(m.keysDesc, prometheus.GaugeValue, float64(keys))
		ch <- prometheus.MustNewConstMetric(m.evictionsDesc, prometheus.CounterValue, float64(evictions))
		ch <- prometheus.MustNewConstMetric(m.refusedDesc, prometheus.CounterValue, float64(refusals))
	}
}

var (
	_ keyrate.Observer     = (*Metrics)(nil)
	_ prometheus.Collector = (*Metrics)(nil)
)
