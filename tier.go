package keyrate

import "github.com/keyrate/keyrate/internal/handle"

// Tier is a handle on one of a store's named policies, from the store's
// Tier method: pass it with each request to choose the policy that
// request is decided under (typically the client's plan, known after
// authentication). Resolving it costs one atomic load, not a lookup by
// name, and it follows the store's SetPolicy: a request made with it after
// a change is decided under the new limits.
//
// The zero Tier is the store's default policy. A Tier is valid only for
// the store that returned it.
type Tier struct{ slot *handle.Slot }

// Name returns the name of the policy t stands for.
func (t Tier) Name() string {
	if t.slot == nil {
		return DefaultPolicy
	}
	return t.slot.Name
}
