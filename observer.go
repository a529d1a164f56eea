package keyrate

// Observer is told of what a store decides, for metrics: how often clients
// hit their limits, under which policy, and how often the store itself
// failed. Set one with WithObserver; the keyrateprom module turns the events
// into Prometheus metrics, keyrateotel into OpenTelemetry ones. A store
// without one pays a nil check per call, nothing more.
//
// Observe is called on the deciding goroutine, after the decision, once per
// call of Allow, AllowN, AllowTier, Reserve, ReserveTier, Wait and WaitTier
// (Wait reports its reservation, not its sleep), and never while the store
// holds a lock. It must be safe for concurrent use and as cheap as a few
// atomic adds: it is on the request path. It must not call the store back.
type Observer interface {
	Observe(e Event)
}

// ObserverFunc is a function that is an Observer.
type ObserverFunc func(e Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// Event is one decision, as an Observer sees it.
type Event struct {
	// Key is the key decided. (Metrics should not label by it: a
	// client's key is unbounded in number.)
	Key string
	// Policy is the name of the policy the key was decided under:
	// DefaultPolicy unless WithPolicies and a tier or WithPolicyFunc
	// picked another. For an unknown tier or policy name, it is the name
	// asked for.
	Policy string
	// Cost is the cost asked for.
	Cost int
	// Allowed reports whether the cost was spent (or, for a reservation,
	// reserved).
	Allowed bool
	// Err is the call's error, nil when the store decided: ErrStoreFull,
	// ErrUnknownPolicy, ErrInvalidCost, ErrCostExceedsBurst, or a store's
	// own (a Redis error). An event with an error is not a decision about
	// the client's limit, and Allowed tells what the caller was answered.
	Err error
	// Degraded reports that a store answered by a failure policy instead
	// of its state (redisbucket, when Redis cannot be reached): Allowed is
	// that policy's answer.
	Degraded bool
	// Shadow reports that the decision was made in shadow mode (httplimit
	// and grpclimit's WithShadow): a denial was counted but not enforced.
	Shadow bool
	// Inflight reports a decision of a concurrency limit (httplimit and
	// grpclimit's WithInflight), not of a rate: Allowed tells whether a
	// slot of the key was free. Its Policy is InflightPolicy and its Cost
	// 1, so that metrics by policy count it apart from the rates.
	Inflight bool
}

// InflightPolicy, "inflight", is the Policy of an Event with Inflight
// set: a concurrency limit's decision.
const InflightPolicy = "inflight"
