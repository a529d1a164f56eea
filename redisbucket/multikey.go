package redisbucket

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/rules"
)

// multiSource is the script of AllowAllContext's one call: gcraSource,
// unchanged, as a function of one key and its arguments, run for each
// key in turn; if a key denies (or errs), the keys spent before it get
// back the values they held, exactly (DUMP before the spend, RESTORE with
// the TTL left), so that a denied request leaves every key as it was. A
// script runs alone on its server, so nothing else sees the spent keys
// before they are restored. The server's TIME is read once, for every
// key.
//
// KEYS are the buckets. ARGV is now in µs ("-1": the server's TIME), the
// least TTL in ms, then for each key m (the count of its arguments that
// follow), the cost, its policy's descriptor, base, and K, I, G and F of
// each window: gcraSource's long form less now, the least TTL and the
// mode. It returns {i, #r, r...}: i the index (from 0) of the key that
// denied, with its reply r, then a peek's reply (cost 0: nothing
// written) of each key after it, each after its length, so that the
// caller can name the short key with the longest wait; or i = -1 and
// every key's reply, each after its length.
const multiSource = `
local function one(KEYS, ARGV)
` + gcraSource + `
end
local now = ARGV[1]
if now == '-1' then
  local t = redis.call('TIME')
  now = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
end
local saved, out, j, denied = {}, {-1}, 3, false
for i = 1, #KEYS do
  local m = tonumber(ARGV[j])
  local a = {now, denied and '0' or ARGV[j + 1], ARGV[2], ARGV[j + 2], ARGV[j + 3], ''}
  for x = j + 4, j + m do a[#a + 1] = ARGV[x] end
  j = j + m + 1
  if denied then
    local r = one({KEYS[i]}, a)
    if type(r) ~= 'table' or r.err then return out end
    out[#out + 1] = #r
    for _, x in ipairs(r) do out[#out + 1] = x end
  else
  local d = redis.call('DUMP', KEYS[i])
  local ttl = 0
  if d then
    ttl = redis.call('PTTL', KEYS[i])
    if ttl == 0 then ttl = 1 elseif ttl < 0 then ttl = 0 end
  end
  saved[i] = {d, ttl}
  local r = one({KEYS[i]}, a)
  if type(r) ~= 'table' or r.err or r[1] ~= -1 then
    for k = i - 1, 1, -1 do
      local s = saved[k]
      if s[1] then
        redis.call('RESTORE', KEYS[k], s[2], s[1], 'REPLACE')
      else
        redis.call('DEL', KEYS[k])
      end
    end
    if type(r) ~= 'table' or r.err then return r end
    out = {i - 1, #r}
    for _, x in ipairs(r) do out[#out + 1] = x end
    denied = true
  else
  out[#out + 1] = #r
  for _, x in ipairs(r) do out[#out + 1] = x end
  end
  end
end
return out
`

// multiScript is multiSource with its SHA1.
var multiScript = redis.NewScript(multiSource)

// multiSHA is multiScript's SHA1, boxed once.
var multiSHA any = multiScript.Hash()

// AllowAll is AllowAllContext with context.Background(): still bounded
// by the store's timeout.
func (s *Store) AllowAll(keys []keyrate.KeyCost) (keyrate.MultiDecision, error) {
	return s.AllowAllContext(context.Background(), keys)
}

// AllowAllContext is keyrate.AllowAll in one script call where it can be:
// one request decided against several keys, each under its own tier, all
// or nothing. The script spends every key's cost in turn, and if a key
// denies, gives the keys before it back the values they held, exactly,
// before any other call sees them: no over-denial, no refund, no
// transient window. The key named on a deny is, of the keys that lack
// their cost, the one with the longest RetryAfter (the first of those):
// the script peeks, writing nothing, at each key after the one that
// denied; when all allow, it is the one left with the fewest Remaining
// (the first of those).
//
// One call needs every key that Redis counts (all but those under an
// unlimited policy) on one server: on a Cluster in one hash slot, on a
// Ring (which picks a shard by the hash tag, or the whole key, not by the
// slot) under one hash tag. Keys share both when each holds the same hash
// tag, a part in braces: with the default prefix, "{acme}:user:alice" and
// "{acme}:org" both hash by "acme" (WithHashTag tags each key whole, so
// keys of one request share a slot only if they are one key: leave it off
// and tag the keys yourself). On a single server (a *redis.Client) any
// keys share it. Where they do not, or where a key's policy is a
// keyrate.SlidingLog (another script), AllowAllContext is
// keyrate.AllowAll, the two-step: each key checked, then spent, by calls
// of its own, with the effects keyrate.AllowAll documents.
//
// Its errors are keyrate.ValidateKeys's, then a key's (keyrate.ErrUnknownPolicy,
// keyrate.ErrInvalidKey, keyrate.ErrCostExceedsBurst), each naming the
// key's index, with nothing spent. When Redis fails, the store's failure
// policy answers for the whole request: FailClosed denies it with an
// error wrapping ErrUnavailable, FailOpen allows it, FallbackLocal asks
// keyrate.AllowAll of the fallback store. The deny cache and leases are
// not consulted: every key's decision is Redis's. The store's observer is
// told of each key's spend, or of the key that denied.
func (s *Store) AllowAllContext(ctx context.Context, keys []keyrate.KeyCost) (keyrate.MultiDecision, error) {
	ctx = orBackground(ctx)
	if err := keyrate.ValidateKeys(keys); err != nil {
		return keyrate.MultiDecision{}, err
	}
	var (
		rss   [keyrate.MaxKeys]*rules.Rules
		plans [keyrate.MaxKeys]*plan
	)
	// One call needs every counted key on one server: a Cluster's keys in
	// one hash slot; a Ring's (or another sharding client's) under one
	// shard key, since a Ring picks a shard by the hash tag (or the whole
	// key), not by the slot, and two keys of one slot may be on two
	// shards. A *redis.Client is one server.
	_, cluster := s.client.(*redis.ClusterClient)
	_, single := s.client.(*redis.Client)
	counted, slot, oneSlot := 0, -1, true
	var shard string
	for i, k := range keys {
		rs, err := s.pols.Rules(k.Tier)
		if err == nil {
			err = checkKey(k.Key)
		}
		if err == nil {
			err = rs.CheckCost(k.Cost)
		}
		if err != nil {
			return keyrate.MultiDecision{Index: i}, fmt.Errorf("key %d (%q): %w", i, k.Key, err)
		}
		rss[i] = rs
		if rs.Unlimited() {
			continue
		}
		if rs.IsLog() {
			return keyrate.AllowAll(s, keys)
		}
		if plans[i], err = s.plan(rs); err != nil {
			return keyrate.MultiDecision{Index: i}, s.fail(err)
		}
		counted++
		rk := s.redisKey(k.Key)
		switch {
		case single:
		case cluster:
			if sl := keySlot(rk); slot < 0 {
				slot = sl
			} else if sl != slot {
				oneSlot = false
			}
		default:
			if sk := shardKey(rk); counted == 1 {
				shard = sk
			} else if sk != shard {
				oneSlot = false
			}
		}
	}
	if !oneSlot {
		return keyrate.AllowAll(s, keys)
	}
	if counted == 0 { // every key unlimited
		return keyrate.MultiDecision{Decision: rss[0].UnlimitedDecision()}, nil
	}
	if err := ctx.Err(); err != nil {
		return keyrate.MultiDecision{}, fmt.Errorf("redisbucket: %w", err)
	}

	// EVALSHA, the SHA, the number of keys, the keys, now and the least
	// TTL (set by send), then each key's arguments.
	args := make([]any, 0, 5+counted*(5+4*keyrate.MaxLimits))
	args = append(args, "evalsha", multiSHA, counted)
	var firstKey string
	for i, k := range keys {
		if plans[i] != nil {
			rk := s.redisKey(k.Key)
			if firstKey == "" {
				firstKey = rk
			}
			args = append(args, rk)
		}
	}
	args = append(args, nil, nil)
	for i, k := range keys {
		if p := plans[i]; p != nil {
			args = append(args, 3+len(p.args), k.Cost, p.descArg, s.baseArg)
			args = append(args, p.args...)
		}
	}
	res, err := s.run(ctx, firstKey, &plan{multi: args}, 0, "")
	if err != nil {
		if err != errRefused && ctx.Err() == nil {
			err = s.fail(err)
		}
		return s.failedAll(ctx, keys, rss[:len(keys)], err)
	}
	return s.readAll(keys, rss[:len(keys)], plans[:len(keys)], res)
}

// readAll builds AllowAllContext's answer from the script's reply res.
func (s *Store) readAll(keys []keyrate.KeyCost, rss []*rules.Rules, plans []*plan, res []int64) (keyrate.MultiDecision, error) {
	if len(res) < 1 {
		return keyrate.MultiDecision{}, s.fail(fmt.Errorf("redisbucket: a reply of %d values from the AllowAll script", len(res)))
	}
	denier, res := int(res[0]), res[1:]
	var best keyrate.MultiDecision
	found := false
	for i, k := range keys {
		rs := rss[i]
		var d keyrate.Decision
		if plans[i] == nil {
			d = rs.UnlimitedDecision()
		} else {
			if denier >= 0 { // the reply holds the denier's alone
				if i != s.countedIndex(plans, denier) {
					continue
				}
			}
			if len(res) < 1 || int(res[0]) > len(res)-1 || res[0] < 0 {
				return keyrate.MultiDecision{}, s.fail(fmt.Errorf("redisbucket: a malformed reply from the AllowAll script"))
			}
			r := res[1 : 1+res[0]]
			res = res[1+res[0]:]
			extra := 0
			if plans[i].lcm > 0 {
				extra = 1
			}
			var st [keyrate.MaxLimits]rules.State
			n := rs.Len()
			denied, t0, bad, err := plans[i].read(r, st[:n], extra)
			if err != nil {
				return keyrate.MultiDecision{}, s.fail(err)
			}
			if bad {
				s.malformed.Add(1)
				if f := s.set.onError; f != nil {
					f(fmt.Errorf("%w at key %q: answered as an empty bucket and replaced with one (AllowAll)", ErrMalformedBucket, s.redisKey(k.Key)))
				}
			}
			d = rs.Decide(st[:n], t0, k.Cost, denied)
			if denier >= 0 {
				s.observe(k, rs, d.Allowed)
				md := keyrate.MultiDecision{Decision: d, Index: i}
				s.longest(keys[i+1:], rss[i+1:], plans[i+1:], res, &md)
				return md, nil
			}
		}
		s.observe(k, rs, d.Allowed)
		if !found || d.Remaining < best.Remaining {
			best, found = keyrate.MultiDecision{Decision: d, Index: i}, true
		}
	}
	if denier >= 0 {
		return keyrate.MultiDecision{}, s.fail(fmt.Errorf("redisbucket: the AllowAll script named key %d of %d", denier, len(keys)))
	}
	return best, nil
}

// longest makes md, a denied request's decision, that of the key of keys
// (after md's, under rss and plans) that lacks its cost with the longest
// wait, if one waits longer than md's: res holds the script's peek of
// each counted key, in order (fewer if a peek failed). A reply that does
// not read is left out: md stands.
func (s *Store) longest(keys []keyrate.KeyCost, rss []*rules.Rules, plans []*plan, res []int64, md *keyrate.MultiDecision) {
	base := md.Index + 1
	for j, p := range plans {
		if p == nil {
			continue
		}
		if len(res) < 1 || res[0] < 0 || int(res[0]) > len(res)-1 {
			return
		}
		r := res[1 : 1+res[0]]
		res = res[1+res[0]:]
		extra := 0
		if p.lcm > 0 {
			extra = 1
		}
		var st, take [keyrate.MaxLimits]rules.State
		n := rss[j].Len()
		_, t0, bad, err := p.read(r, st[:n], extra)
		if err != nil || bad {
			continue
		}
		copy(take[:n], st[:n])
		if denied := rss[j].Take(take[:n], t0, keys[j].Cost); denied >= 0 {
			if d := rss[j].Decide(st[:n], t0, keys[j].Cost, denied); d.RetryAfter > md.RetryAfter {
				md.Decision, md.Index = d, base+j
			}
		}
	}
}

// countedIndex returns the index in keys of the n-th key the script
// counted (those with a plan).
func (s *Store) countedIndex(plans []*plan, n int) int {
	for i, p := range plans {
		if p != nil {
			if n == 0 {
				return i
			}
			n--
		}
	}
	return -1
}

// observe tells the store's observer of one key's decision.
func (s *Store) observe(k keyrate.KeyCost, rs *rules.Rules, allowed bool) {
	if s.pols.Observer() != nil {
		s.pols.ObserveEvent(keyrate.Event{Key: k.Key, Policy: rs.Name(), Cost: k.Cost, Allowed: allowed})
	}
}

// failedAll is the failure policy's answer to a request whose script
// call failed with err: ctx's error if the caller gave up.
func (s *Store) failedAll(ctx context.Context, keys []keyrate.KeyCost, rss []*rules.Rules, err error) (keyrate.MultiDecision, error) {
	if ctx.Err() != nil {
		return keyrate.MultiDecision{}, fmt.Errorf("redisbucket: %w", ctx.Err())
	}
	s.degraded.Add(1)
	switch s.set.policy {
	case FailOpen:
		return keyrate.MultiDecision{Decision: keyrate.Decision{Allowed: true, Policy: rss[0].Name(), Limit: first(rss[0])}}, nil
	case FallbackLocal:
		var local [keyrate.MaxKeys]keyrate.KeyCost
		for i, k := range keys {
			t, terr := s.fallback.Tier(rss[i].Name())
			if terr != nil { // not reached: the fallback has every policy
				return keyrate.MultiDecision{Decision: closed(rss[i], k.Cost), Index: i}, nil
			}
			local[i] = keyrate.KeyCost{Key: k.Key, Tier: t, Cost: k.Cost}
		}
		d, ferr := keyrate.AllowAll(s.fallback, local[:len(keys)])
		if ferr != nil { // a cost above the fallback's Burst: denied, as FailClosed
			return keyrate.MultiDecision{Decision: closed(rss[d.Index], keys[d.Index].Cost), Index: d.Index}, nil
		}
		return d, nil
	}
	return keyrate.MultiDecision{Decision: closed(rss[0], keys[0].Cost)}, err
}

// sendMulti sends AllowAllContext's call, args, with now and the least
// TTL set, through c (and the batcher b, if any: it is a call, within
// WithPipelining's turns as any other), bounded by ctx.
func sendMulti(ctx context.Context, c redis.UniversalClient, b *batcher, args []any, now, minTTL any) ([]int64, error) {
	n := args[2].(int)
	args[3+n], args[4+n] = now, minTTL
	return call(ctx, c, b, &args, args, multiSource)
}

// shardKey returns the part of the Redis key k that a redis.Ring picks
// its shard by: its hash tag as keySlot finds it, or else k whole.
func shardKey(k string) string {
	for i := 0; i < len(k); i++ {
		if k[i] == '{' {
			for j := i + 1; j < len(k); j++ {
				if k[j] == '}' {
					if j > i+1 {
						return k[i+1 : j]
					}
					return k
				}
			}
			return k
		}
	}
	return k
}

// keySlot returns the Redis Cluster hash slot of the Redis key k: CRC16
// (XMODEM) modulo 16384 of its hash tag, the part between its first "{"
// and the next "}" if that is not empty, or else of k whole.
func keySlot(k string) int {
	k = shardKey(k)
	var crc uint16
	for i := 0; i < len(k); i++ {
		crc ^= uint16(k[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
