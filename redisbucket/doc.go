// Package redisbucket is the keyrate store for a fleet: its buckets live in
// Redis, so every process that shares the server (or Cluster), the key
// prefix and the policies shares each key's limits.
//
//	client := redis.NewClient(&redis.Options{
//		Addr:                  "redis:6379",
//		ContextTimeoutEnabled: true, // required: lets the timeout bound a call
//	})
//	limiter, err := redisbucket.New(client, keyrate.PerMinute(60),
//		redisbucket.WithTimeout(50*time.Millisecond),
//		redisbucket.WithFailurePolicy(redisbucket.FailClosed))
//	...
//	d, err := limiter.AllowNContext(ctx, userID, 1)
//
// # One script, one key, one clock
//
// Every call is one round trip: EVALSHA of one Lua script (loaded on first
// use; EVAL when the server answers NOSCRIPT) on the bucket's one key, so it
// is atomic and safe on Redis Cluster: every window of a key's policy lives
// in that one key. The script reads the server's TIME, the one clock of
// the whole fleet, and runs the same transition as the in-process stores: the
// generic cell rate algorithm on each window's theoretical arrival time
// (TAT), all windows or none, here in integer ticks of 1/k µs, where k is
// the least unit in which the window's token interval is whole (k = 1 when
// it is a whole number of µs). Lua numbers are doubles, so every number the
// script computes is kept below 2^53: a window's fill time is at most 2^52
// ticks (142 years at k = 1, checked by New), time is saturated at 2^52 µs
// of Unix time (the year 2112), and the products of a change of policy
// (below) are taken on integers of 24-bit limbs. The key is written with
// PX at the instant its last window is full again, rounded up to a whole
// ms, so idle keys delete themselves; a denied call and a Peek write
// nothing (but a spend replaces a malformed value, and carries over a key
// whose policy changed: see below). The server must be Redis 5 or later
// (the script reads TIME before it writes, which needs effects
// replication, the default since 5).
//
// The script returns each window's debt (TAT − now), and the Store builds
// the Decision from them with the in-process stores' arithmetic. For one schedule
// of calls at whole-µs times a Store makes the same decisions as the
// in-process stores, field for field (the tests replay random schedules of
// requests, refunds, tiers and changes of policy on both, and run the
// conformance suite with WithTimeSource, which sends explicit times
// instead of reading TIME).
//
// # Policies
//
// keyrate.WithPolicies, keyrate.WithPolicyFunc, Tier, AllowTier, Refund
// and SetPolicy work as in the in-process stores (see
// keyrate.PolicyLimiter). An unlimited policy answers without a call.
// Policies are per Store: give every process of a fleet the same ones, and
// make the same SetPolicy calls on each.
//
// A key's value records the limits each window was written under, as
// "K:I:G:F" (ticks per µs, ticks per token, in-process ticks per tick,
// fill time), beside each window's TAT. A request under other limits (the
// policy changed, in this process or another, or the key moved to another
// tier) carries the key over exactly as an in-process store does, in the
// same call, by the rule of docs/design/carry.md: each new window owes
// the most that an old window of its length owes (or one whose length the
// new policy lacks), counted as spent now, and refills at its new rate, to
// keyrate's cap of 2^62 of its ticks. The carried state is written
// at once, by a spend even when it is denied, and by a refund. Since only
// the limits are recorded, a change to the same limits is no change: an
// in-process store carries the key over to the new version anyway, which
// only shows once its clock has gone back.
//
// Every value, the default policy's too, is "K:I:G:F,.../a:b:r,..." (each
// window's TAT in whole µs and ticks, less r in-process ticks after a
// change of policy), about 40 bytes a window, so that processes started
// with different limits (a rolling deploy that changes the default)
// carry one another's values as a tier move carries a key in process.
// A fleet can be upgraded one process at a time:
//
//   - The previous version wrote a value of its default policy's one
//     window as "a:b", which records no limits. This version reads it as
//     under its own default's window 0, as that version did; so, until
//     every process runs this version, a key an old process wrote is read
//     under each reader's own default: upgrade with the same default,
//     then change it.
//   - The previous version reads a one-window value of this version under
//     its own default's limits as its own, and one under other limits as
//     a change of policy, which it carries as this version does: never
//     malformed, never admitting more than this version would.
//   - The version before policies reads every value of this version as
//     malformed: an empty bucket, which admits nothing until it refills
//     and never more than the limit.
//
// # Window algorithms
//
// A limit of keyrate.FixedWindow or keyrate.SlidingWindow (Limit.Using),
// alone or beside token buckets in a policy, runs in the same one script
// call, with the same decisions as in process (Remaining, RetryAfter and
// ResetAfter, for time moving forward): the value records each window's
// index and counts. Windows are aligned to the Unix epoch: a window of
// length W starts at every multiple of W of the server's TIME (of the
// time source's reading under WithTimeSource), so that every process of
// a fleet, and every server of a Cluster, agrees on them, where an
// in-process store aligns them to its creation. The script counts time in
// whole µs, so New refuses a window whose length is not a whole number of
// µs; it compares the sliding window's weighted counts exactly in doubles,
// so New refuses a sliding window whose Rate times its length in µs
// exceeds 2^53 (at most 104 249 in a day, 2 501 999 in an hour); and the
// lengths of a policy's windows must have a common multiple within a
// year (Go places each reply's windows on one reading modulo it), as any
// common set (a second, a minute, an hour, a day) has. A debt carried
// over from another limit far ahead saturates at a window starting 2^53
// µs after the epoch (the year 2255), where keyrate's saturates at its
// clock range; both deny for years. A window's value is
// "0:W:N:A/i:p:q" (its length in µs, its limit, 1 for the fixed window or
// 2 for the sliding one; the index of its window and the counts of the
// previous window and of that one); a process of the previous version,
// which refuses window limits, reads it under a policy of its own as
// malformed: an empty bucket, which admits nothing.
//
// The deny cache serves window algorithms as token buckets: it denies a
// key until its cached state, read as the time moves on, would allow the
// request, which for a window is exactly Redis's answer, at most one round
// trip late. Leases are not taken for a key under a policy with a window
// algorithm (such a key goes to Redis on every call), since tokens handed
// out up to a lease's Life late would land in the next window, which
// counts them nowhere. Reserve and Wait return an error wrapping
// keyrate.ErrUnsupportedAlgorithm under such a policy: the script reserves under
// token buckets only.
//
// # The sliding-window log
//
// A keyrate.SlidingLog limit (exact: at most N admitted in any interval of
// length W; the only window of its policy) runs in a second script, one
// call per decision on the server's TIME, with the same decisions as the
// in-process log (mutexbucket, striped: Allowed, Remaining, RetryAfter,
// ResetAfter) for time moving forward. The key holds the log as a packed
// string, "~W:N:te:base;" and 26 bytes an entry (the µs it leaves the
// window and a running total of the cost, fixed-width so that the script
// finds the window's first entry and a retry's entry by binary search):
// one entry per µs that admitted within the window, so at most N entries.
// The script reads and writes the whole string on a spend, so a key's
// memory (26·N bytes at most) and each call's server time grow with N:
// New and SetPolicy accept N up to MaxLogRate (1024: 26 KiB for a full
// log, and 64µs to 250µs of server time a call on one, measured: see
// MaxLogRate), below the in-process stores' keyrate.MaxLogRate. W must be
// a whole number of µs. The key expires when its newest entry leaves the
// window (rounded up to a whole ms); a denied spend and a Peek write
// nothing. A refund takes its cost off the newest entries still in the
// window, as in process.
//
// A change of policy between a log and any other (SetPolicy, tiers,
// WithPolicyFunc) never admits more than the old state allowed, and
// carries the key as keyrate's carry does: the log script reads a value
// whose window 0 is a token bucket as that window's debt in tokens
// (whole, above N if it owed more: a bucket's reservations), one entry
// leaving at the later of now + W and the instant the window is full;
// the token-bucket script reads a log's value as its cost (whole) owed in
// window 0's tokens from now, its other windows full; a log carried into
// a log of other limits keeps the cost in its window, whole, on its
// newest entry. One departure: a value whose window 0 is a fixed or
// sliding window is read by the log script as full debt, N admitted at
// now leaving at the later of now + W and the key's expiry (the instant
// that state is full again on the server's clock; an hour at least under
// WithTimeSource). Neither counts as malformed. A key of another type (WRONGTYPE) or a string of neither
// form, or a log value out of range (its total above N, entries out of
// order at its ends, a length not a whole number of entries), is
// malformed: read as N admitted at now, counted and reported as for the
// other algorithms, and replaced by a spend or a refund.
//
// The deny cache is bypassed for a log's keys (a log's summary cannot
// say when it admits again without the log), as are leases; Reserve and
// Wait return an error wrapping keyrate.ErrUnsupportedAlgorithm, as in
// process. FallbackLocal's store (atomicbucket) refuses a log, so New
// refuses FallbackLocal with a log policy.
//
// # Waiting
//
// The Store is a keyrate.WaitLimiter: Reserve, ReserveTier and Wait (and
// their Context forms) reserve tokens for the earliest slot at which every
// window holds them, as an in-process store decides them, in one
// script call; Wait then sleeps in the calling process, on the store's
// local clock (clock.System(), or the time source of WithTimeSource), and
// sends nothing to Redis while it sleeps. A reservation's slot is the
// local reading taken when Redis answered plus the wait the server
// computed on its own clock, so it is late by up to the reply's latency
// (for clocks that run at the same rate), never early; the fleet's
// waiters on a key are served in the order the server saw their
// reservations. Cancel (and a Wait whose context ends
// while it sleeps) is one more call, which gives the tokens back only if
// the key is under the same limits, window 0 holds the state the
// reservation left, and some window still owes more than its Burst: the
// latest reservation on the key, before its slot. A refund gives nothing
// back while a window owes more than its Burst.
//
// While Redis does not answer, FailClosed's Reserve and Wait return an
// error wrapping ErrUnavailable; FailOpen reserves at once (Wait returns
// nil); FallbackLocal reserves and waits in the fallback store. A cancel
// Redis does not answer gives nothing back. Processes of the previous
// version refund tokens promised to reservations: upgrade a fleet before
// it waits.
//
// # The deny cache
//
// WithDenyCache (opt-in) keeps, for a bounded number of keys, the state
// Redis answered for a key it denied (or left without a token to spare),
// and denies the key's next requests in process, with no round trip,
// until that state says the cost is there: under a flood on denied keys
// Redis sees about one call per key per retry interval, and a request the
// cache denies takes well under a microsecond and allocates nothing. It
// never admits (every admission is Redis's), and it denies at most one
// round trip's time longer than Redis would; a refund or change of policy
// made by another process reaches it only when its state would allow the
// request (see WithDenyCache). Stats.DeniedLocally counts its denials.
//
// # Leases for hot keys
//
// WithLeases (opt-in) lets a process spend a hot key's tokens in Redis in
// bulk, a lease of Size tokens in one call, and hand them out in process
// for up to the lease's Life, giving back the unused ones when it ends.
// Every token is spent in Redis before it is handed out, and every
// window's Burst is lowered by the tokens it refills in one Life, so that
// tokens handed out up to a Life late keep the fleet within Burst +
// Rate·T/Per; the price, a smaller burst and the tokens leases hold, is
// stated in WithLeases.
//
// # Requests in flight
//
// Store.Inflight returns an InflightStore, a fleet-wide concurrency limit
// (an inflight.Limiter, which httplimit and grpclimit take): at most N
// slots held per key across every process. It shares the Store's client,
// timeout, breaker and failure policy.
//
// A key is one sorted set of its holders, each scored with the time its
// lease ends. An acquire is one script: drop the holders whose lease has
// ended, and if fewer than the limit remain add a new one (a random ID) at
// now plus the lease, on the server's clock (TIME, or WithTimeSource's);
// the key then expires a lease after its last acquire, so idle keys
// vanish. A release is one ZREM of the holder, which is idempotent by
// nature: a second one removes nothing.
//
// A holder that dies without releasing (a crashed process, a lost
// release) frees its slot when its lease ends: the lease is the bound on
// over-holding, and should exceed the longest request; a request that runs
// longer than its lease stops counting then, and another may take its
// slot. A release that Redis does not answer goes to the WithOnError
// callback, and its slot stays held until its lease ends.
//
// When Redis does not answer an acquire, the failure policy answers:
// FailClosed gives no slot and an error wrapping ErrUnavailable
// (httplimit and grpclimit then answer 503 / Unavailable); FailOpen a slot
// that holds nothing; FallbackLocal a slot of an in-process inflight.Store
// of the same limit, per process: so up to the limit times the processes
// fleet-wide while Redis is down, and, as Redis comes back, the fallback's
// holders beside the limit in Redis until they release.
//
// # Pipelining
//
// WithPipelining (opt-in) sends the calls that arrive while a few others
// are in flight together, as one pipeline: one write and one read, on
// the client and on the server, for many EVALSHAs. Each call is still
// its own script run, decision and count; only the system calls and the
// round trip are shared. A call that finds fewer in flight to its server
// goes straight out, as without it; on a Cluster each master has its own
// turns and queue, so a master that hangs delays no call to another. A
// call that leaves before its pipeline's reply (its context ended) has
// spent its tokens in Redis without using them: under-admission only. It
// pays with many concurrent callers on a busy server (BenchmarkRedis,
// op=allow-pipelined); see WithPipelining for when it does not.
//
// # Redis must not evict buckets
//
// A bucket that Redis deletes before it is full again comes back full, so
// the limit holds only under maxmemory-policy noeviction. Every bucket key
// has a TTL, so every other policy, volatile-* included, lets Redis evict
// buckets when memory runs short, and a client that fills memory with keys
// of its own (each new key it uses is one) can have another client's
// emptied bucket evicted, and that client admitted far above its limit.
// New therefore reads maxmemory-policy from every server with CONFIG GET
// and refuses any other policy with an error wrapping ErrEvictingPolicy;
// WithEvictionAllowed accepts the risk and skips the check. When the check
// cannot be made (CONFIG disabled or denied, as on many managed services;
// the server unreachable or too slow at start) the store still starts:
// PolicyCheck reports an error wrapping ErrPolicyUnchecked, which New also
// passes to the WithOnError callback. Under noeviction a server that
// reaches maxmemory refuses the script's writes (OOM) instead, for every
// key, and the store answers that as an outage, by its failure policy
// (FailOpen then admits every request): give Redis the memory for every
// key in use within one fill time.
//
// # Values the store did not write
//
// A bucket key holding a value no Store writes (another program's string,
// a hash or list, a number out of range) is malformed. The script answers
// as if every window were empty at the time of the call, which never
// admits more than the limits whatever the failure policy; AllowN (and
// Refund) replaces the value with that empty bucket, which then refills
// and expires as any other, so the key heals within one fill time (Peek
// writes nothing). It
// is not an outage: the call returns Redis's answer with no error, counts
// in Stats.Malformed, and passes an error wrapping ErrMalformedBucket to
// the WithOnError callback.
//
// # Keys
//
// The Redis key of user key k is prefix+k, or prefix+"{"+k+"}" with
// WithHashTag (default prefix "keyrate:"). Keys are binary-safe, from 1 to
// MaxKeyLen (512) bytes; the empty key, usually a key function that found
// nothing, is rejected with keyrate.ErrInvalidKey, as is a longer one. Len
// counts the keys under the prefix with SCAN: O(keys in the database), for
// tests and diagnostics.
//
// # When Redis does not answer
//
// Every call is bounded by the store's timeout (WithTimeout, default 50ms),
// retries included, through the context given to the client, which is why
// New requires ContextTimeoutEnabled. A call that fails or runs out of time
// never blocks past the timeout, never panics, is counted in Stats, is
// passed to the WithOnError callback, and gets the answer of the store's
// FailurePolicy:
//
//   - FailClosed (the default): denied, with an error wrapping
//     ErrUnavailable, so that a caller can tell an outage from a rate limit;
//   - FailOpen: allowed, with no error;
//   - FallbackLocal: the answer of an in-process atomicbucket.Store with the
//     store's policies (its default replaced by WithFallbackLimit, if
//     given), with no error, until Redis answers again (a cost above the
//     fallback's Burst is denied as FailClosed denies, still with no
//     error). Each process's fallback is its own: WithFallbackNodes
//     divides its limits among a fleet of N processes, so that together
//     they stay within each limit (WithFallbackNodes states each
//     policy's overshoot bound), N configured or, with WithNodeCount,
//     counted through Redis while it answers.
//
// A hung server (one that accepts connections and never answers) costs
// each call its full timeout. WithBreaker (opt-in) bounds that: after a
// number of failures in a row it stops sending calls for a back-off,
// answering each at once by the failure policy, then lets one probe
// through; a hung server then costs one timeout per back-off. Each
// server has its own breaker (each master of a Cluster, each shard of a
// Ring), so a dead master holds back only its own keys.
//
// Allow returns the policy's answer in every case. A refund Redis does
// not answer is lost under FailClosed (an error wrapping ErrUnavailable)
// and FailOpen (no error: nothing was counted), and given to the fallback
// store under FallbackLocal. A caller's own context that ends first is not
// an outage: the call returns its error. A nil context is
// context.Background(), for every method that takes one.
//
// # Metrics
//
// keyrate.WithObserver makes the store tell an observer (such as the
// keyrateprom module's Metrics) of every AllowN, AllowTier, Reserve and
// Wait, as the in-process stores do; an answer the failure policy gave
// is an event with Degraded set. The fallback store reports nothing of
// its own, so nothing is counted twice.
package redisbucket
