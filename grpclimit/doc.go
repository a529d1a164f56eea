// Package grpclimit is a pair of gRPC server interceptors, unary and
// stream, that rate-limit calls with a keyrate.Limiter: one token bucket
// per client key.
//
//	limiter, _ := atomicbucket.New(keyrate.PerMinute(100))
//	rl, _ := grpclimit.New(limiter, grpclimit.ByMetadata("x-api-key"))
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(rl.Unary),
//		grpc.ChainStreamInterceptor(rl.Stream),
//	)
//
// For each call (each unary call, and each stream once, when it starts)
// the interceptor computes a key (by default the peer's IP address, see
// ByPeer; or a metadata value, ByMetadata; or the method, ByMethod), a cost
// (1 by default, see WithCost), and calls the limiter's AllowN once, or
// AllowTier when WithTier names the call's policy. An allowed call goes on
// to its handler; a denied one ends with codes.ResourceExhausted and a
// google.rpc.RetryInfo detail (errdetails.RetryInfo) whose retry_delay is
// the decision's RetryAfter: the time after which the same call is
// allowed, if nothing else spends first.
//
// # Failures never admit
//
// Nothing that goes wrong lets a call through unlimited. A call that
// carries no key (a ByMetadata key missing or empty, an empty key from
// ByFunc) is the client's omission: codes.InvalidArgument by default, see
// WithNoKeyCode. A key function that fails otherwise, a cost the limiter
// rejects (keyrate.ErrInvalidCost, keyrate.ErrCostExceedsBurst), a key it
// cannot hold (keyrate.ErrInvalidKey) and a policy the store lacks
// (keyrate.ErrUnknownPolicy) are server faults: codes.Internal, with a
// message that does not reveal the key. Any other error from the limiter,
// such as a remote store's outage, is codes.Unavailable, which clients
// may retry.
//
// A limiter that takes a context (redisbucket.Store's AllowNContext and
// AllowTierContext) is called with the call's context, so that a store
// call ends when its RPC does.
//
// # Calls in flight
//
// WithInflight caps the calls each key has running at once (an
// inflight.Limiter, in process or redisbucket's for a fleet), beside the
// rate limit or alone (New's limiter nil): a unary call holds a slot while
// its handler runs, a stream while its handler runs, which ends when the
// stream is cancelled. A call over the cap ends with ResourceExhausted
// and a message saying "too many calls in flight"; the observer's events
// for the cap have keyrate.Event.Inflight set.
//
// # Shadow mode
//
// WithShadow rolls a new limit out safely: every call is decided as usual,
// spending from the buckets when allowed, but none is refused for the
// limiter's sake. A call that would have been refused (denied, or failed
// as above) goes on to its handler, and is reported to the function
// WithShadow was given, to be counted or logged.
package grpclimit
