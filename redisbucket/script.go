package redisbucket

import (
	"fmt"
	"math/bits"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
)

// Bounds of the script's arithmetic. Lua numbers are doubles, exact for
// integers below 2^53; every number the script computes stays below it.
const (
	// maxFill bounds a bucket's fill time F in ticks, so that the script's
	// largest sum, a debt of at most F plus a spend of at most F, is below
	// 2^53. At one tick per µs that is 142 years.
	maxFill = 1 << 52
	// maxMicros bounds a reading of now in µs (the script saturates it
	// there): 2^52 µs of Unix time is the year 2112. A stored arrival time
	// is at most maxMicros + F/K µs, below 2^53.
	maxMicros = 1 << 52
	// nsPerMicro converts the server's µs clock to Policy's ns.
	nsPerMicro = 1000
	// timeSourceTTL is the least TTL of a key under WithTimeSource, whose
	// time need not keep pace with the server's clock that expires keys.
	timeSourceTTL = time.Hour
)

// gcraScript is the one script every call runs: GCRA on a theoretical
// arrival time (TAT), as keyrate.Rule does in process, in integer ticks of
// 1/K µs.
//
// KEYS[1] is the bucket. ARGV is now in µs ("-1": the server's TIME), the
// cost (0: peek, which writes nothing), K (ticks per µs), I (ticks per
// token), F (ticks to fill an empty bucket) and the least TTL in ms. The
// stored value is "a:b", the TAT as a whole µs a plus b ticks (0 ≤ b < K);
// no value is a full bucket. A successful spend sets the value with PX at
// the time the bucket will be full again, rounded up to a whole ms (or the
// least TTL, if longer), so idle keys delete themselves. A key that
// outlives its TAT is a full bucket, as a missing one is, so a longer TTL
// costs only memory.
//
// A value no call writes is malformed: not "a:b" in decimal digits, b ≥ K,
// a TAT beyond the latest a call can write (now is at most 2^52 µs and a
// debt at most F ticks), or a key of another type (GET answers WRONGTYPE).
// The script then answers as for an empty bucket at now (debt F), which
// never admits more than the limit, and a spend (allowed or not: with a
// debt of F it is denied) overwrites the value with that empty bucket,
// expiring as any other, so the key heals; a peek writes nothing.
//
// It returns {allowed, du, db, malformed}: the bucket's debt (TAT − now, 0
// for a full bucket) after the call, in whole µs du plus db ticks, and 1 if
// the value was malformed. du is at most 2^53 (a TAT of at most 2^52 µs +
// F/K, read at now = 0), so du·1000 ns fits an int64. Go turns that into
// the Decision with keyrate.Rule's rounding.
//
// Numbers go to redis.call through string.format('%.0f'), which is exact
// below 2^53, never through Lua's number-to-string conversion (14
// significant digits).
var gcraScript = redis.NewScript(`
local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
if now > 4503599627370496 then now = 4503599627370496 end
local cost, K, I, F = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local du, db, bad = 0, 0, 0
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' and string.sub(v.err or '', 1, 9) ~= 'WRONGTYPE' then
  return redis.error_reply(v.err or 'keyrate: GET failed')
end
if v then
  local a, b
  if type(v) == 'string' then
    local sa, sb = string.match(v, '^(%d+):(%d+)$')
    if sa and #sa <= 17 and #sb <= 17 then a, b = tonumber(sa), tonumber(sb) end
  end
  if a == nil or b >= K or (a - 4503599627370496) * K > F then
    bad = 1
    db = math.fmod(F, K)
    du = (F - db) / K
  elseif a >= now then
    du, db = a - now, b
  end
end
local function put(nd)
  local ndb = math.fmod(nd, K)
  local ndu = (nd - ndb) / K
  local unit = K * 1000
  local r = math.fmod(nd, unit)
  local ttl = (nd - r) / unit
  if r > 0 then ttl = ttl + 1 end
  if ttl < tonumber(ARGV[6]) then ttl = tonumber(ARGV[6]) end
  redis.call('SET', KEYS[1], string.format('%.0f:%.0f', now + ndu, ndb), 'PX', string.format('%.0f', ttl))
  return ndu, ndb
end
if cost == 0 or du * K > F then return {0, du, db, bad} end
local nd = du * K + db + cost * I
if nd > F then
  if bad == 1 then put(F) end
  return {0, du, db, bad}
end
du, db = put(nd)
return {1, du, db, bad}
`)

// units is a Limit compiled for the script: time in ticks of 1/k µs, with
// the same token interval as keyrate.Rule, so that decisions are equal.
type units struct {
	limit    keyrate.Limit
	k        int64 // ticks per µs
	interval int64 // ticks per token
	fill     int64 // ticks to fill an empty bucket
	// args are k, interval and fill as the script's ARGV strings.
	argK, argI, argF string
}

// compileUnits validates l for keyrate (limit.Validate) and for the script,
// returning an error wrapping keyrate.ErrInvalidLimit that names the bound.
//
// keyrate.Rule counts time in ticks of 1/s ns and a token as P ticks, P
// being Per·s/Rate when that is whole and rounded up otherwise (see
// keyrate.Rule.Exact). The script's clock has whole µs, 1000·s Policy
// ticks; dividing both by g = gcd(P, 1000·s) gives the script's tick, of
// 1/k µs with k = 1000·s/g, and its interval I = P/g. Every quantity the
// script handles is then a whole number of its ticks, and each decision is
// the same rational number Policy computes, rounded the same way.
func compileUnits(l keyrate.Limit) (units, error) {
	if err := l.Validate(); err != nil {
		return units{}, err
	}
	pol, err := keyrate.NewRule(l, nil)
	if err != nil {
		return units{}, err
	}
	s := pol.Scale()
	hi, lo := bits.Mul64(uint64(l.Per), s)
	q, r := bits.Div64(hi, lo, uint64(l.Rate)) // hi < Rate: Validate bounds it
	if r != 0 {
		q++ // Policy rounds a coarse interval up
	}
	g := gcd(q, nsPerMicro*s)
	k, interval := int64(nsPerMicro*s/g), int64(q/g)
	if interval < k {
		return units{}, fmt.Errorf("%w: Rate %d per %v is too fast for redisbucket: a token every %v is below 1µs, the server clock's resolution",
			keyrate.ErrInvalidLimit, l.Rate, l.Per, time.Duration(q/s))
	}
	if hi, lo := bits.Mul64(uint64(l.Burst), uint64(interval)); hi != 0 || lo > maxFill {
		return units{}, fmt.Errorf("%w: Burst %d takes too long to fill at %d per %v for redisbucket: the most is %d",
			keyrate.ErrInvalidLimit, l.Burst, l.Rate, l.Per, maxFill/interval)
	}
	u := units{limit: l, k: k, interval: interval, fill: int64(l.Burst) * interval}
	u.argK = strconv.FormatInt(u.k, 10)
	u.argI = strconv.FormatInt(u.interval, 10)
	u.argF = strconv.FormatInt(u.fill, 10)
	return u, nil
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// debt is a bucket's debt as the script returns it: TAT − now, in whole µs
// plus ticks, each below 2^53.
type debt struct{ micros, ticks int64 }

// maxDebtMicros bounds the whole µs of a debt the script returns: a TAT of
// at most maxMicros + F/K µs (F ≤ maxFill, K ≥ 1), read at now = 0.
const maxDebtMicros = maxMicros + maxFill

// checkReply returns nil if res is a reply the script can give for u:
// {allowed, du, db, malformed}, each in range, so that no Decision built
// from it can hold a negative or wrapped duration.
func (u *units) checkReply(res []int64) error {
	if len(res) != 4 {
		return fmt.Errorf("script returned %d values, want 4", len(res))
	}
	if res[0] < 0 || res[0] > 1 || res[1] < 0 || res[1] > maxDebtMicros || res[2] < 0 || res[2] >= u.k || res[3] < 0 || res[3] > 1 {
		return fmt.Errorf("script returned %v, out of range", res)
	}
	return nil
}

// ticks returns the debt in ticks, and false if it exceeds the fill time
// (which happens only after the clock went backwards).
func (u *units) ticks(d debt) (int64, bool) {
	if d.micros > u.fill/u.k {
		return 0, false
	}
	t := d.micros*u.k + d.ticks
	return t, t <= u.fill
}

// nanos returns d plus extra ticks (which may be negative) in ns, rounded
// up, and 0 if that is negative (which no reply of the script leads to),
// without overflow: d.micros is at most maxDebtMicros = 2^53 (checkReply),
// so d.micros·1000 is below 2^63, and |extra| is at most F ≤ 2^52.
func (u *units) nanos(d debt, extra int64) time.Duration {
	return time.Duration(max(d.micros*nsPerMicro+ceilDiv((d.ticks+extra)*nsPerMicro, u.k), 0))
}

// ceilDiv returns ⌈n/d⌉ for d > 0.
func ceilDiv(n, d int64) int64 {
	q := n / d // truncates toward zero: the ceiling for n < 0
	if n%d > 0 {
		q++
	}
	return q
}

// remaining returns the whole tokens in a bucket with debt d.
func (u *units) remaining(d debt) int {
	t, ok := u.ticks(d)
	if !ok {
		return 0
	}
	return int((u.fill - t) / u.interval)
}

// decide builds the Decision for a request of cost given the bucket's debt
// after it, as keyrate.Rule.Decide does.
func (u *units) decide(d debt, cost int, allowed bool) keyrate.Decision {
	dec := keyrate.Decision{
		Allowed:    allowed,
		Limit:      u.limit,
		Remaining:  u.remaining(d),
		ResetAfter: u.nanos(d, 0),
	}
	if !allowed {
		dec.RetryAfter = u.nanos(d, int64(cost)*u.interval-u.fill)
	}
	return dec
}

// peek builds the Decision for a cost-1 request that spends nothing, as
// keyrate.Rule.Peek does.
func (u *units) peek(d debt) keyrate.Decision {
	t, ok := u.ticks(d)
	allowed := ok && t+u.interval <= u.fill
	return u.decide(d, 1, allowed)
}
