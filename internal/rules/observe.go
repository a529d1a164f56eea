package rules

import "github.com/keyrate/keyrate"

// Observer returns the store's keyrate.Observer (WithObserver), nil for
// none: a store's front tests it once per call and, when it is nil, calls
// nothing more.
func (ps *Policies) Observer() keyrate.Observer { return ps.obs }

// Observe tells the store's observer of a call under the policy named
// policy that allowed or denied cost, or failed with err. It must be
// called only when Observer is not nil.
func (ps *Policies) Observe(key, policy string, cost int, allowed bool, err error) {
	ps.obs.Observe(keyrate.Event{Key: key, Policy: policy, Cost: cost, Allowed: allowed, Err: err})
}

// ObserveEvent tells the store's observer of e. It must be called only
// when Observer is not nil.
func (ps *Policies) ObserveEvent(e keyrate.Event) { ps.obs.Observe(e) }

// ObserveMiss tells the store's observer, if it has one, of a call that
// failed with err before its policy was found (a Tier of another store, a
// name WithPolicyFunc returns that the store lacks, a Wait's context done
// before the call): under tier's policy, or, for the zero Tier, under the
// policy WithPolicyFunc names for key (the default without one).
func (ps *Policies) ObserveMiss(key string, tier keyrate.Tier, cost int, err error) {
	if ps.obs == nil {
		return
	}
	name := tier.Name()
	if slotOf(tier) == nil && ps.fn != nil {
		if name = ps.fn(key); name == "" {
			name = keyrate.DefaultPolicy
		}
	}
	ps.Observe(key, name, cost, false, err)
}
