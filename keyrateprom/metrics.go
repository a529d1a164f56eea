package keyrateprom

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/eventmetrics"
)

// MaxPolicies, 64, is the most policy label values a Metrics keeps;
// events for any further policy name are counted under the label value
// Other.
const MaxPolicies = eventmetrics.MaxPolicies

// MaxUnknownPolicies, 32, is the most of the MaxPolicies policy label
// values that names a store lacks (events with keyrate.ErrUnknownPolicy)
// may take; any further such name is counted under Other. Such a name can be
// a client's choice (a store's WithPolicyFunc that reads the client's
// key), and must not crowd out the policies the store has.
const MaxUnknownPolicies = eventmetrics.MaxUnknownPolicies

// MaxPolicyLabel, 128, is the longest policy label value, in bytes: a
// longer name is labelled with its first bytes and "...", so that a name
// from a client's key cannot make every scrape carry it in each of a
// policy's series.
const MaxPolicyLabel = eventmetrics.MaxPolicyLabel

// Other, "other", is the policy label of events past MaxPolicies
// distinct names.
const Other = eventmetrics.Other

// Metrics counts the events of the stores or middleware it observes and
// exposes them as Prometheus metrics (see the package documentation). It
// is a keyrate.Observer and a prometheus.Collector; it is safe for
// concurrent use. Create one with New.
type Metrics struct {
	decisions, shadow, cost, errs, degraded *prometheus.Desc
	keys, evictions, refused                *prometheus.Desc

	// policies holds the counts of each policy label value, which Collect
	// reads: they live in the Metrics, not in a registry.
	policies *eventmetrics.Policies[policy]
	// watch is the store watched, and keyrate_evictions_total's and
	// keyrate_refused_total's values.
	watch eventmetrics.Watch
}

// Stater is what Watch reads at each scrape: the in-process stores (every
// keyrate.BoundedLimiter) are Staters.
type Stater interface {
	Stats() keyrate.Stats
}

// policy is one policy label value and its counts, made when the policy
// is first seen so that Observe does no label lookup.
type policy struct {
	eventmetrics.Counts
	label string
}

// New returns a Metrics whose every metric has the constant label
// store=name. An empty name is allowed (the label is then empty), and so
// are several Metrics in one registry as long as their names differ.
func New(name string) *Metrics {
	cl := prometheus.Labels{"store": name}
	desc := func(metric, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("keyrate_"+metric, help, labels, cl)
	}
	return &Metrics{
		decisions: desc("decisions_total",
			"Rate-limit decisions, by policy and decision (allowed or denied).", "policy", "decision"),
		shadow: desc("shadow_denied_total",
			"Denials that shadow mode let through, by policy.", "policy"),
		cost: desc("cost_allowed_total",
			"Cost (tokens) allowed, by policy.", "policy"),
		errs: desc("errors_total",
			"Calls that ended in an error instead of a decision, by policy and kind.", "policy", "error"),
		degraded: desc("degraded_total",
			"Decisions a failure policy made instead of the store, by policy and decision.", "policy", "decision"),
		keys: desc("keys",
			"Keys the store tracks now."),
		evictions: desc("evictions_total",
			"Buckets the store evicted because they were full."),
		refused: desc("refused_total",
			"New keys the store refused because it tracked its maximum."),
		policies: eventmetrics.New(func(label string) *policy { return &policy{label: label} }),
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
	m.policies.Get(e.Policy, e.Err).Add(e)
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
	for _, d := range []*prometheus.Desc{m.decisions, m.shadow, m.cost, m.errs, m.degraded, m.keys, m.evictions, m.refused} {
		ch <- d
	}
}

// Collect is the prometheus.Collector method. A Metrics not made by New
// collects nothing.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	if !m.made() {
		return
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- constMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	m.policies.Range(func(p *policy) {
		counter(m.decisions, p.Allowed.Load(), p.label, "allowed")
		counter(m.decisions, p.Denied.Load(), p.label, "denied")
		counter(m.shadow, p.ShadowDenied.Load(), p.label)
		counter(m.cost, p.Cost.Load(), p.label)
		counter(m.degraded, p.DegradedAllowed.Load(), p.label, "allowed")
		counter(m.degraded, p.DegradedDenied.Load(), p.label, "denied")
		for k := range p.Errors {
			counter(m.errs, p.Errors[k].Load(), p.label, eventmetrics.ErrorKind(k).String())
		}
	})
	if keys, evictions, refusals, ok := m.watch.Read(); ok {
		ch <- constMetric(m.keys, prometheus.GaugeValue, float64(keys))
		counter(m.evictions, evictions)
		counter(m.refused, refusals)
	}
}

// constMetric returns prometheus.NewConstMetric's metric, or an invalid
// one carrying its error (a store name that is no valid label value,
// which a registry refuses at Register: Collect called without one).
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

var (
	_ keyrate.Observer     = (*Metrics)(nil)
	_ prometheus.Collector = (*Metrics)(nil)
)
