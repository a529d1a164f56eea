package keyrateotel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/eventmetrics"
	"github.com/keyrate/keyrate/internal/isnil"
)

// ScopeName is the instrumentation scope (the meter's name) of every
// instrument a Metrics reports to.
const ScopeName = "github.com/keyrate/keyrate/keyrateotel"

// MaxPolicies, 64, is the most keyrate.policy.name values a Metrics keeps;
// events for any further policy name are recorded under the value Other.
const MaxPolicies = eventmetrics.MaxPolicies

// MaxUnknownPolicies, 32, is the most of the MaxPolicies
// keyrate.policy.name values that names a store lacks (events with
// keyrate.ErrUnknownPolicy) may take; any further such name is recorded
// under Other. Such a name can be a client's choice (a store's
// WithPolicyFunc that reads the client's key), and must not crowd out the
// policies the store has.
const MaxUnknownPolicies = eventmetrics.MaxUnknownPolicies

// MaxPolicyLabel, 128, is the longest keyrate.policy.name value, in
// bytes: a longer name is recorded as its first bytes and "...", so that
// a name from a client's key is not exported with each of a policy's
// points.
const MaxPolicyLabel = eventmetrics.MaxPolicyLabel

// Other, "other", is the keyrate.policy.name of events past MaxPolicies
// distinct names.
const Other = eventmetrics.Other

// Attribute keys of the instruments.
const (
	StoreKey    = attribute.Key("keyrate.store.name")  // the name given to New; absent when it is ""
	PolicyKey   = attribute.Key("keyrate.policy.name") // the policy decided under, bounded (see MaxPolicies)
	DecisionKey = attribute.Key("keyrate.decision")    // "allowed" or "denied"
	ErrorKey    = attribute.Key("error.type")          // the kind of error, such as "store_full"
)

// Metrics counts the events of the stores or middleware it observes and
// reports them as OpenTelemetry instruments (see the package
// documentation). It is a keyrate.Observer; it is safe for concurrent
// use. Create one with New.
type Metrics struct {
	decisions, shadow, cost, errs, degraded metric.Int64ObservableCounter
	keys                                    metric.Int64ObservableUpDownCounter
	evicted, refused                        metric.Int64ObservableCounter

	// policies holds the counts of each keyrate.policy.name value, which
	// the callback reports.
	policies  *eventmetrics.Policies[policy]
	storeOpts []metric.ObserveOption // the attribute set of keyrate.store.name
	watch     eventmetrics.Watch
	reg       metric.Registration // the callback
}

// policy is one keyrate.policy.name value's counts and attribute sets,
// each an option ready to pass to ObserveInt64, made when the policy is
// first seen so that Observe does no label lookup and the callback builds
// no set.
type policy struct {
	eventmetrics.Counts
	allowed, denied, policy []metric.ObserveOption
	errs                    [eventmetrics.NumErrorKinds][]metric.ObserveOption
}

// Stater is what Watch reads at each collection: the in-process stores
// (every keyrate.BoundedLimiter) are Staters.
type Stater interface {
	Stats() keyrate.Stats
}

// Option configures New.
type Option func(*config)

type config struct {
	provider metric.MeterProvider
	err      error
}

// WithMeterProvider makes New create the instruments from p's meter
// named ScopeName. The default is otel.GetMeterProvider(), the global
// provider at the time of New. A nil p keeps the default; a typed nil
// (such as a nil *sdkmetric.MeterProvider), whose meter would panic, makes
// New fail with keyrate.ErrInvalidOption.
func WithMeterProvider(p metric.MeterProvider) Option {
	return func(c *config) {
		switch {
		case p == nil:
		case isnil.Is(p):
			c.err = fmt.Errorf("%w: keyrateotel.WithMeterProvider: a nil %T", keyrate.ErrInvalidOption, p)
		default:
			c.provider = p
		}
	}
}

// New returns a Metrics whose every point has the attribute
// keyrate.store.name=name, or none when name is "". Metrics of different
// names can share a MeterProvider; two of one name record to the same
// points. A nil Option changes nothing. New fails only on a name that is
// not valid UTF-8 (OTLP and Prometheus refuse such a string), a misused
// option, or an error of the provider's meter.
func New(name string, opts ...Option) (*Metrics, error) {
	c := config{}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	if !utf8.ValidString(name) {
		return nil, fmt.Errorf("keyrateotel: New: the name %q is not valid UTF-8", name)
	}
	if c.provider == nil {
		c.provider = otel.GetMeterProvider()
	}
	meter := c.provider.Meter(ScopeName)
	var store []attribute.KeyValue
	if name != "" {
		store = []attribute.KeyValue{StoreKey.String(name)}
	}
	m := &Metrics{
		storeOpts: []metric.ObserveOption{metric.WithAttributes(store...)},
		policies: eventmetrics.New(func(label string) *policy {
			return newPolicy(store, label)
		}),
	}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	m.decisions = counter("keyrate.decisions", "{decision}",
		"Rate-limit decisions, by policy and decision (allowed or denied).")
	m.shadow = counter("keyrate.shadow.denials", "{decision}",
		"Denials that shadow mode let through, by policy.")
	m.cost = counter("keyrate.cost.allowed", "{token}",
		"Cost (tokens) allowed, by policy.")
	m.errs = counter("keyrate.errors", "{error}",
		"Calls that ended in an error instead of a decision, by policy and kind.")
	m.degraded = counter("keyrate.degraded.decisions", "{decision}",
		"Decisions a failure policy made instead of the store, by policy and decision.")
	m.evicted = counter("keyrate.key.evicted", "{key}",
		"Buckets the store evicted because they were full.")
	m.refused = counter("keyrate.key.refused", "{key}",
		"New keys the store refused because it tracked its maximum.")
	keys, err := meter.Int64ObservableUpDownCounter("keyrate.key.count",
		metric.WithUnit("{key}"), metric.WithDescription("Keys the store tracks now."))
	m.keys = keys
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, fmt.Errorf("keyrateotel: New: %w", err)
	}
	m.reg, err = meter.RegisterCallback(m.report,
		m.decisions, m.shadow, m.cost, m.errs, m.degraded, m.keys, m.evicted, m.refused)
	if err != nil {
		return nil, fmt.Errorf("keyrateotel: New: %w", err)
	}
	return m, nil
}

// newPolicy returns the counts of the keyrate.policy.name value label,
// zero, and its attribute sets, each with the store's attributes.
func newPolicy(store []attribute.KeyValue, label string) *policy {
	with := func(kv ...attribute.KeyValue) []metric.ObserveOption {
		kv = append(append(kv, store...), PolicyKey.String(label))
		return []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
	}
	p := &policy{
		allowed: with(DecisionKey.String("allowed")),
		denied:  with(DecisionKey.String("denied")),
		policy:  with(),
	}
	for k := range p.errs {
		p.errs[k] = with(ErrorKey.String(eventmetrics.ErrorKind(k).String()))
	}
	return p
}

// made reports whether m was made by New: a nil or zero Metrics, which
// has no instruments, is one that every method leaves alone.
func (m *Metrics) made() bool { return m != nil && m.policies != nil }

// Observe counts e, for the provider to read at its next collection. It
// is the keyrate.Observer method. A Metrics not made by New (nil, or the
// zero value) counts nothing.
func (m *Metrics) Observe(e keyrate.Event) {
	if !m.made() {
		return
	}
	m.policies.Get(e.Policy, e.Err).Add(e)
}

// Watch makes each collection read s.Stats() for keyrate.key.count,
// keyrate.key.evicted and keyrate.key.refused. A later Watch replaces the
// store watched; a nil s stops watching. A typed nil (such as a nil
// *atomicbucket.Store), whose Stats would panic at the collection, is
// refused with an error and changes nothing.
//
// The two counters count what the stores did while they were watched,
// from the Watch call on: they start at 0 in a new Metrics, a store
// watched later adds its evictions and refusals from then, and one
// replaced by a later Watch (or by nil) keeps what it added, read once
// more at the switch. So neither counter ever goes backwards, and a store
// watched twice is not counted twice.
func (m *Metrics) Watch(s Stater) error {
	if !m.made() {
		return errors.New("keyrateotel: Watch: a Metrics not made by New")
	}
	if err := m.watch.Set(s); err != nil {
		return fmt.Errorf("keyrateotel: Watch: %w", err)
	}
	return nil
}

// report is the callback of every instrument: it reports each policy's
// counts, and the watched store's, if any.
func (m *Metrics) report(_ context.Context, o metric.Observer) error {
	m.policies.Range(func(p *policy) {
		o.ObserveInt64(m.decisions, toInt64(p.Allowed.Load()), p.allowed...)
		o.ObserveInt64(m.decisions, toInt64(p.Denied.Load()), p.denied...)
		o.ObserveInt64(m.shadow, toInt64(p.ShadowDenied.Load()), p.policy...)
		o.ObserveInt64(m.cost, toInt64(p.Cost.Load()), p.policy...)
		o.ObserveInt64(m.degraded, toInt64(p.DegradedAllowed.Load()), p.allowed...)
		o.ObserveInt64(m.degraded, toInt64(p.DegradedDenied.Load()), p.denied...)
		for k := range p.Errors {
			o.ObserveInt64(m.errs, toInt64(p.Errors[k].Load()), p.errs[k]...)
		}
	})
	if keys, evictions, refusals, ok := m.watch.Read(); ok {
		o.ObserveInt64(m.keys, int64(keys), m.storeOpts...)
		o.ObserveInt64(m.evicted, toInt64(evictions), m.storeOpts...)
		o.ObserveInt64(m.refused, toInt64(refusals), m.storeOpts...)
	}
	return nil
}

// toInt64 returns n, or math.MaxInt64 if n is larger.
func toInt64(n uint64) int64 {
	return int64(min(n, math.MaxInt64))
}

// Close unregisters the callback through which the provider reads m,
// which New registers: m's instruments have no points after it. Call it
// when a Metrics is done with and its MeterProvider lives on, so that the
// provider holds the Metrics no longer. A Metrics not made by New, or
// closed before, has nothing to close.
func (m *Metrics) Close() error {
	if !m.made() {
		return nil
	}
	return m.reg.Unregister()
}

var _ keyrate.Observer = (*Metrics)(nil)
