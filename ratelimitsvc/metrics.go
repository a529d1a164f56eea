package ratelimitsvc

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxDetailedLabels bounds the descriptor label values that rules with
// detailed_metric or value_to_metric (whose labels hold the request's
// values) add to the metrics; beyond it, such descriptors are counted
// under the descriptor label "(other)".
const MaxDetailedLabels = 1000

// Label values the service uses for what has no name of its own.
const (
	labelUnknownDomain = "(unknown)" // a domain the config lacks
	labelOther         = "(other)"   // a detailed label past MaxDetailedLabels
)

// metrics are the service's own Prometheus metrics.
type metrics struct {
	decisions *prometheus.CounterVec
	shadow    *prometheus.CounterVec
	hits      *prometheus.CounterVec
	unmatched *prometheus.CounterVec
	requests  *prometheus.CounterVec
	errors    *prometheus.CounterVec
	reloads   *prometheus.CounterVec
	reloadAt  prometheus.Gauge
	rules     prometheus.Gauge
	global    prometheus.Counter

	detailed sync.Map // label (domain + "\x00" + descriptor) -> *counters
	nDetail  atomic.Int64
	mu       sync.Mutex // serialises adding a detailed label
}

// counters are one descriptor label's counters, resolved once.
type counters struct {
	ok, over, shadow, hits prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keyrate_rls_decisions_total",
			Help: "Descriptors decided under a rule, by domain, descriptor (the rule's path) and code (OK or OVER_LIMIT, after shadow mode).",
		}, []string{"domain", "descriptor", "code"}),
		shadow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keyrate_rls_shadow_mode_total",
			Help: "Descriptors over their limit that shadow_mode answered OK, by domain and descriptor.",
		}, []string{"domain", "descriptor"}),
		hits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keyrate_rls_hits_total",
			Help: "Hits asked for (hits_addend, 1 by default) by descriptors decided under a rule, by domain and descriptor.",
		}, []string{"domain", "descriptor"}),
		unmatched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keyrate_rls_unmatched_total",
			Help: "Descriptors that matched no rule (answered OK), by domain; a domain the config lacks is \"(unknown)\".",
		}, []string{"domain"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keyrate_rls_requests_total",
			Help: "ShouldRateLimit calls, by overall code (OK, OVER_LIMIT) or error (invalid_request, backend, overrides).",
		}, []string{"code"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keyrate_rls_backend_errors_total",
			Help: "Store calls that failed (Redis unavailable, a store full), by domain and descriptor.",
		}, []string{"domain", "descriptor"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "keyrate_rls_config_reloads_total",
			Help: "Config loads, by result (success, or error: the last good config stays).",
		}, []string{"result"}),
		reloadAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "keyrate_rls_config_last_reload_success_timestamp_seconds",
			Help: "When the config in force was loaded, in Unix seconds.",
		}),
		rules: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "keyrate_rls_config_rules",
			Help: "Rules (rate_limit blocks) in the config in force.",
		}),
		global: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "keyrate_rls_global_shadow_mode_total",
			Help: "Requests over the limit that the global shadow mode answered OK.",
		}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.decisions, m.shadow, m.hits, m.unmatched, m.requests, m.errors, m.reloads, m.reloadAt, m.rules, m.global}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// counters returns the counters of a descriptor label.
func (m *metrics) counters(domain, descriptor string) *counters {
	return &counters{
		ok:     m.decisions.WithLabelValues(domain, descriptor, "OK"),
		over:   m.decisions.WithLabelValues(domain, descriptor, "OVER_LIMIT"),
		shadow: m.shadow.WithLabelValues(domain, descriptor),
		hits:   m.hits.WithLabelValues(domain, descriptor),
	}
}

// detailedCounters returns the counters of a label with the request's
// values, at most MaxDetailedLabels of them; past that, "(other)".
func (m *metrics) detailedCounters(domain, descriptor string) *counters {
	k := domain + "\x00" + descriptor
	if c, ok := m.detailed.Load(k); ok {
		return c.(*counters)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.detailed.Load(k); ok {
		return c.(*counters)
	}
	if m.nDetail.Load() >= MaxDetailedLabels {
		k = domain + "\x00" + labelOther
		if c, ok := m.detailed.Load(k); ok {
			return c.(*counters)
		}
		descriptor = labelOther
	}
	c := m.counters(domain, descriptor)
	m.detailed.Store(k, c)
	m.nDetail.Add(1)
	return c
}

// forget deletes the series of a rule's label (a rule a reload removed),
// unless a detailed label reads the same, whose counters stay in use.
func (m *metrics) forget(domain, descriptor string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.detailed.Load(domain + "\x00" + descriptor); ok {
		return
	}
	m.decisions.DeleteLabelValues(domain, descriptor, "OK")
	m.decisions.DeleteLabelValues(domain, descriptor, "OVER_LIMIT")
	m.shadow.DeleteLabelValues(domain, descriptor)
	m.hits.DeleteLabelValues(domain, descriptor)
	m.errors.DeleteLabelValues(domain, descriptor)
}

// reloaded records a config load's outcome.
func (m *metrics) reloaded(err error, rules int, now time.Time) {
	if err != nil {
		m.reloads.WithLabelValues("error").Inc()
		return
	}
	m.reloads.WithLabelValues("success").Inc()
	m.reloadAt.Set(float64(now.UnixNano()) / 1e9)
	m.rules.Set(float64(rules))
}
