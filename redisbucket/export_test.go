package redisbucket

import "github.com/keyrate/keyrate"

// MaxBurst returns the largest Burst New accepts at l's Rate and Per.
func MaxBurst(l keyrate.Limit) int {
	u, err := compileUnits(l.WithBurst(1))
	if err != nil {
		panic(err)
	}
	return int(maxFill / u.interval)
}

// MaxMicros is the latest time the script reads, in µs.
const MaxMicros = maxMicros

// ScriptUnits returns l's ticks per µs, ticks per token and ticks to fill
// in the script's units.
func ScriptUnits(l keyrate.Limit) (k, interval, fill int64) {
	u, err := compileUnits(l)
	if err != nil {
		panic(err)
	}
	return u.k, u.interval, u.fill
}

// Pipelined returns how many calls wait in s's WithPipelining queues and
// how many turns are taken (calls or pipelines in flight), summed over
// the servers.
func Pipelined(s *Store) (queued, inflight int) {
	queued, inflight, _ = s.batch.counts()
	return queued, inflight
}

// PipelineServers returns how many servers of several s's WithPipelining
// keeps turns for (those with a call in flight or queued).
func PipelineServers(s *Store) int {
	_, _, servers := s.batch.counts()
	return servers
}

// counts returns how many calls wait in b's queues, how many turns are
// taken, summed over the servers, and how many servers of several b
// keeps turns for.
func (b *batcher) counts() (queued, inflight, servers int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	queued, inflight = len(b.one.queue), b.one.inflight
	for _, t := range b.nodes {
		queued += len(t.queue)
		inflight += t.inflight
	}
	return queued, inflight, len(b.nodes)
}

// ScriptWindow returns l's descriptor in the script's values, "K:I:G:F",
// and its four numbers, as a call sends them.
func ScriptWindow(l keyrate.Limit) (desc string, args []any) {
	u, err := compileUnits(l)
	if err != nil {
		panic(err)
	}
	k, i, g, f := u.args()
	return u.desc(), []any{k, i, g, f}
}

// KeySlot is keySlot: the Redis Cluster hash slot of a Redis key.
var KeySlot = keySlot

// DenyCacheOverflow returns how many of keys s's deny cache has no room
// for when all of them are cached at once: over every bucket, the keys
// its hash puts there beyond the bucket's denyWays.
func DenyCacheOverflow(s *Store, keys []string) int {
	n := make(map[*denyBucket]int)
	for _, k := range keys {
		n[s.deny.bucket(k)]++
	}
	over := 0
	for _, c := range n {
		over += max(c-denyWays, 0)
	}
	return over
}
