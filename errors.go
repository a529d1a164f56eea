package keyrate

import "errors"

// Errors returned by keyrate and its stores. Each is wrapped with the values
// involved, so test for them with errors.Is.
var (
	// ErrInvalidLimit reports a Limit that is out of range: Rate, Per or
	// Burst below 1, or a limit the packed state cannot represent (see the
	// package documentation for the bounds). Returned by Limit.Validate and
	// by every store's New.
	ErrInvalidLimit = errors.New("keyrate: invalid limit")

	// ErrInvalidCost reports a cost below 1.
	ErrInvalidCost = errors.New("keyrate: invalid cost")

	// ErrCostExceedsBurst reports a cost larger than the limit's Burst. Such
	// a request can never be allowed, however long the client waits, so it
	// is an error rather than a deny that a client would retry forever.
	ErrCostExceedsBurst = errors.New("keyrate: cost exceeds burst")

	// ErrInvalidKey reports a key a store cannot hold. The in-process stores
	// accept every string, the empty string included; redisbucket rejects
	// the empty key and keys over 512 bytes.
	ErrInvalidKey = errors.New("keyrate: invalid key")

	// ErrInvalidOption reports an option that does not apply to the store it
	// was given to, or an option value out of range.
	ErrInvalidOption = errors.New("keyrate: invalid option")

	// ErrInvalidPolicy reports a Policy that cannot be enforced: an empty
	// name, no limits or more than MaxLimits, an invalid window (the error
	// then wraps ErrInvalidLimit too), limits on an unlimited policy, or
	// two policies of one store with one name. The error names the value
	// and its bound.
	ErrInvalidPolicy = errors.New("keyrate: invalid policy")

	// ErrUnknownPolicy reports a policy name a store does not have (from
	// Tier, or from the function given to WithPolicyFunc), or a Tier of
	// another store. The error names it.
	ErrUnknownPolicy = errors.New("keyrate: unknown policy")

	// ErrStoreFull reports a request for a new key that a store could not
	// track without exceeding its WithMaxKeys limit, even after evicting
	// every idle bucket it could. The store fails closed: the request is
	// refused, spends nothing and stores nothing, while keys the store
	// already tracks are served normally. The error names the limit.
	ErrStoreFull = errors.New("keyrate: store full")

	// ErrUnsupportedAlgorithm reports a limit whose algorithm the store
	// cannot carry, from New or SetPolicy (SlidingLog on atomicbucket;
	// the error then wraps ErrInvalidLimit or ErrInvalidPolicy too), or a call the algorithm does not support
	// (Reserve and Wait under SlidingLog). The error names the algorithm.
	ErrUnsupportedAlgorithm = errors.New("keyrate: unsupported algorithm")

	// ErrWaitExceedsDeadline reports a Wait that would end after its
	// context's deadline: it returns at once, spending nothing. The error
	// wraps context.DeadlineExceeded too, so errors.Is(err,
	// context.DeadlineExceeded) holds, and names the wait and the time
	// left.
	ErrWaitExceedsDeadline = errors.New("keyrate: wait exceeds the deadline")
)
