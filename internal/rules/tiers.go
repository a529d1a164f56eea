package rules

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/clock"
	"github.com/keyrate/keyrate/internal/config"
	"github.com/keyrate/keyrate/internal/handle"
	"github.com/keyrate/keyrate/internal/wrap"
)

// tierSlot holds the current version of one named policy. A Tier
// points to its first field.
type tierSlot struct {
	handle.Slot // the policy's name
	owner       *Policies
	cur         atomic.Pointer[Rules]
}

// slotOf returns the slot t stands for: nil for the zero Tier. It is a
// conversion, free on the request path (see internal/handle).
func slotOf(t keyrate.Tier) *tierSlot {
	return (*tierSlot)(unsafe.Pointer((*handle.Tier)(unsafe.Pointer(&t)).Slot))
}

// tierOf returns the Tier that stands for slot.
func tierOf(slot *tierSlot) keyrate.Tier {
	h := handle.Tier{Slot: &slot.Slot}
	return *(*keyrate.Tier)(unsafe.Pointer(&h))
}

// Policies is a store's set of policies: the default one (from the Limit
// given to New, or a policy named DefaultPolicy in WithPolicies), the
// named ones from WithPolicies, and the function from WithPolicyFunc. It
// compiles every policy for one clock and epoch, so that a key's state can
// be carried from one policy to another. Stores hold one and expose its
// methods; it is safe for concurrent use.
type Policies struct {
	clock clock.Clock
	epoch time.Duration
	def   *tierSlot
	fn    func(key string) string
	obs   keyrate.Observer // WithObserver's; nil for none

	noLog string // the store that refuses SlidingLog policies (RefuseLog)

	mu    sync.Mutex                                     // serialises Set
	names atomic.Pointer[map[string]*tierSlot]           // copy-on-write, rebuilt only when added has grown by its size
	added atomic.Pointer[xsync.MapOf[string, *tierSlot]] // nil until Set adds a name; every name Set added, never removed
	since int                                            // names added since names was built, under mu
	n     int                                            // the policies, under mu
	few   atomic.Pointer[[]*tierSlot]                    // the slots, if at most scanFew; else empty
	ver   atomic.Uint64                                  // Set calls that changed a policy (Version)
}

// scanFew is the most policies ForKey finds by comparing names in turn,
// which is cheaper than hashing the name for a handful of tiers.
const scanFew = 8

// add publishes slot, a policy of a new name (mu held): in added, so
// that lookup finds it at once, and in a rebuilt names only once added
// holds as many names since the last rebuild as names has (so that a
// store given names one by one, as a config of thousands of rules is,
// pays a copy of each name a logarithmic number of times, not once an
// add); and, while there are at most scanFew policies, in the list
// lookup scans, after added, so that a reader finding the list empty
// finds every slot in names or added.
func (ps *Policies) add(slot *tierSlot) {
	a := ps.added.Load()
	if a == nil {
		a = xsync.NewMapOf[string, *tierSlot]()
		ps.added.Store(a)
	}
	a.Store(slot.Name, slot)
	ps.n++
	ps.since++
	if names := *ps.names.Load(); ps.since >= max(len(names), scanFew) {
		next := make(map[string]*tierSlot, len(names)+ps.since)
		maps.Copy(next, names)
		a.Range(func(name string, slot *tierSlot) bool { next[name] = slot; return true })
		ps.names.Store(&next)
		ps.since = 0
	}
	var few []*tierSlot
	if ps.n <= scanFew {
		few = append(append(few, *ps.few.Load()...), slot)
	}
	ps.few.Store(&few)
}

// lookup returns the slot of the policy named name, or nil.
func (ps *Policies) lookup(name string) *tierSlot {
	if few := *ps.few.Load(); len(few) > 0 {
		for _, slot := range few {
			if slot.Name == name {
				return slot
			}
		}
		return nil
	}
	if slot := (*ps.names.Load())[name]; slot != nil {
		return slot
	}
	if a := ps.added.Load(); a != nil {
		slot, _ := a.Load(name)
		return slot
	}
	return nil
}

// each calls f with every policy's slot, in no set order (mu held).
func (ps *Policies) each(f func(*tierSlot)) {
	names := *ps.names.Load()
	for _, slot := range names {
		f(slot)
	}
	if a := ps.added.Load(); a != nil {
		a.Range(func(name string, slot *tierSlot) bool {
			if names[name] == nil {
				f(slot)
			}
			return true
		})
	}
}

// NewPolicies compiles a store's policies: limit as the default policy
// (unless set.Policies has one named DefaultPolicy), and set.Policies,
// for set.Clock. It returns an error wrapping ErrInvalidLimit for an
// invalid limit, ErrInvalidPolicy for an invalid policy or two policies
// with one name.
func NewPolicies(limit keyrate.Limit, set config.Settings) (*Policies, error) {
	c := set.Clock
	if c == nil {
		c = clock.System()
	}
	if _, err := compile(limit); err != nil {
		return nil, err // checked even when a policy named DefaultPolicy replaces it
	}
	ps := &Policies{clock: c, epoch: c.Now(), fn: set.PolicyFunc}
	ps.obs, _ = set.Observer.(keyrate.Observer)
	names := make(map[string]*tierSlot, len(set.Policies)+1)
	for _, p := range set.Policies {
		if _, dup := names[p.Name]; dup {
			return nil, fmt.Errorf("%w: two policies are named %q", keyrate.ErrInvalidPolicy, p.Name)
		}
		rs, err := compileRules(p, ps.clock, ps.epoch)
		if err != nil {
			return nil, err
		}
		slot := &tierSlot{Slot: handle.Slot{Name: p.Name}, owner: ps}
		slot.cur.Store(rs)
		names[p.Name] = slot
	}
	if names[keyrate.DefaultPolicy] == nil {
		rs, err := compileRules(keyrate.Policy{Name: keyrate.DefaultPolicy, Limits: []keyrate.Limit{limit}}, ps.clock, ps.epoch)
		if err != nil {
			return nil, err
		}
		slot := &tierSlot{Slot: handle.Slot{Name: keyrate.DefaultPolicy}, owner: ps}
		slot.cur.Store(rs)
		names[keyrate.DefaultPolicy] = slot
	}
	ps.def = names[keyrate.DefaultPolicy]
	var few []*tierSlot
	if len(names) <= scanFew {
		for _, slot := range names {
			few = append(few, slot)
		}
	}
	ps.n = len(names)
	ps.few.Store(&few)
	ps.names.Store(&names)
	return ps, nil
}

// Default returns the current version of the default policy.
func (ps *Policies) Default() *Rules { return ps.def.cur.Load() }

// Now reads the store's clock.
func (ps *Policies) Now() time.Duration { return ps.clock.Now() }

// Tier returns a handle on the policy named name, or an error wrapping
// ErrUnknownPolicy that names it.
func (ps *Policies) Tier(name string) (keyrate.Tier, error) {
	slot := ps.lookup(name)
	if slot == nil {
		return keyrate.Tier{}, fmt.Errorf("%w: %q", keyrate.ErrUnknownPolicy, name)
	}
	return tierOf(slot), nil
}

// Rules returns the current version of the policy t stands for, or an
// error wrapping ErrUnknownPolicy if t came from another store.
func (ps *Policies) Rules(t keyrate.Tier) (*Rules, error) {
	slot := slotOf(t)
	if slot == nil {
		return ps.def.cur.Load(), nil
	}
	if slot.owner != ps {
		return nil, fmt.Errorf("%w: %q is a Tier of another store", keyrate.ErrUnknownPolicy, slot.Name)
	}
	return slot.cur.Load(), nil
}

// Peek is a store's Peek: peek under key's policy (ForKey), or the zero
// Decision for a key whose policy the store lacks (not allowed, as Allow
// would answer).
func (ps *Policies) Peek(key string, peek func(rs *Rules) keyrate.Decision) keyrate.Decision {
	rs, err := ps.ForKey(key)
	if err != nil {
		return keyrate.Decision{}
	}
	return peek(rs)
}

// PeekTier is a store's PeekTier: peek under tier's policy, or an error
// wrapping ErrUnknownPolicy for a Tier of another store.
func (ps *Policies) PeekTier(tier keyrate.Tier, peek func(rs *Rules) keyrate.Decision) (keyrate.Decision, error) {
	rs, err := ps.Rules(tier)
	if err != nil {
		return keyrate.Decision{}, err
	}
	return peek(rs), nil
}

// HasFunc reports whether the store has a WithPolicyFunc: without one,
// every key is under Default, which a store's hot path reads without
// calling ForKey.
func (ps *Policies) HasFunc() bool { return ps.fn != nil }

// ForKey returns the current version of the policy for key: the one
// WithPolicyFunc names (the default for the empty name), or the default
// policy without a function. It returns an error wrapping
// ErrUnknownPolicy if the function names a policy the store lacks.
func (ps *Policies) ForKey(key string) (*Rules, error) {
	if ps.fn == nil {
		return ps.def.cur.Load(), nil
	}
	name := ps.fn(key)
	if name == "" {
		return ps.def.cur.Load(), nil
	}
	slot := ps.lookup(name)
	if slot == nil {
		return nil, fmt.Errorf("%w: %q, named by WithPolicyFunc for key %q", keyrate.ErrUnknownPolicy, name, key)
	}
	return slot.cur.Load(), nil
}

// Set adds p, or replaces the policy of the same name (DefaultPolicy
// included), at once: requests that read the policy after Set returns are
// decided under p. It returns an error wrapping ErrInvalidPolicy, and
// changes nothing, if p is invalid.
func (ps *Policies) Set(p keyrate.Policy) error {
	rs, err := compileRules(p, ps.clock, ps.epoch)
	if err != nil {
		return err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.noLog != "" && rs.log {
		return wrap.Errorf("%w: %w: %s cannot carry policy %q's %v window", keyrate.ErrInvalidPolicy, keyrate.ErrUnsupportedAlgorithm, ps.noLog, p.Name, keyrate.SlidingLog)
	}
	defer ps.ver.Add(1) // after the policy is published: see Version
	if slot := ps.lookup(p.Name); slot != nil {
		slot.cur.Store(rs)
		return nil
	}
	slot := &tierSlot{Slot: handle.Slot{Name: p.Name}, owner: ps}
	slot.cur.Store(rs)
	ps.add(slot)
	return nil
}

// Version returns the number of Set calls that have changed or added a
// policy. It grows after the change is published, so that a reader that
// sees a version, then lists the policies (List), lists that version's
// policies or newer ones: what it built from them is stale only if a
// later read of Version differs (httplimit's header fields).
func (ps *Policies) Version() uint64 { return ps.ver.Load() }

// List returns the current version of every policy, in no set order.
func (ps *Policies) List() []keyrate.Policy {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]keyrate.Policy, 0, ps.n)
	ps.each(func(slot *tierSlot) { out = append(out, slot.cur.Load().Policy()) })
	return out
}

// RefuseLog makes ps refuse SlidingLog policies, for a store (named store)
// that keeps one word per window: it returns an error wrapping
// ErrUnsupportedAlgorithm and ErrInvalidLimit if a policy of ps counts with
// SlidingLog already, and Set refuses one from then on (wrapping
// ErrUnsupportedAlgorithm and ErrInvalidPolicy). Call it from New, before
// the store is shared.
func (ps *Policies) RefuseLog(store string) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.noLog = store
	var err error
	ps.each(func(slot *tierSlot) {
		if rs := slot.cur.Load(); rs.log && err == nil {
			err = wrap.Errorf("%w: %w: %s cannot carry policy %q's %v window", keyrate.ErrInvalidLimit, keyrate.ErrUnsupportedAlgorithm, store, slot.Name, keyrate.SlidingLog)
		}
	})
	return err
}
