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
// arrival time (TAT), as keyrate.Policy does in process, in integer ticks of
// 1/K µs.
//
// KEYS[1] is the bucket. ARGV is now in µs ("-1": the server's TIME), the
// cost (0: peek, which writes nothing), K (ticks per µs), I (ticks per
// token), F (ticks to fill an empty bucket) and the least TTL in ms. The stored value is "a:b",
// the TAT as a whole µs a plus b ticks (0 ≤ b < K); no value is a full
// bucket. A successful spend sets the value with PX at the time the bucket
// will be full again, rounded up to a whole ms (or the least TTL, if
// longer), so idle keys delete themselves. A key that outlives its TAT is
// a full bucket, as a missing one is, so a longer TTL costs only memory.
//
// It returns {allowed, du, db}: the bucket's debt (TAT − now, 0 for a full
// bucket) after the call, in whole µs du plus db ticks. Go turns that into
// the Decision with keyrate.Policy's rounding.
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
local du, db = 0, 0
local v = redis.call('GET', KEYS[1])
if v then
  local a, b = string.match(v, '^(%d+):(%d+)$')
  a, b = tonumber(a), tonumber(b)
  if a == nil or b == nil or b >= K then
    return redis.error_reply('keyrate: malformed bucket value')
  end
  if a >= now then du, db = a - now, b end
end
if cost == 0 or du * K > F then return {0, du, db} end
local nd = du * K + db + cost * I
if nd > F then return {0, du, db} end
db = math.fmod(nd, K)
du = (nd - db) / K
local unit = K * 1000
local r = math.fmod(nd, unit)
local ttl = (nd - r) / unit
if r > 0 then ttl = ttl + 1 end
if ttl < tonumber(ARGV[6]) then ttl = tonumber(ARGV[6]) end
redis.call('SET', KEYS[1], string.format('%.0f:%.0f', now + du, db), 'PX', string.format('%.0f', ttl))
return {1, du, db}
`)

// units is a Limit compiled for the script: time in ticks of 1/k µs, with
// the same token interval as keyrate.Policy, so that decisions are equal.
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
// keyrate.Policy counts time in ticks of 1/s ns and a token as P ticks, P
// being Per·s/Rate when that is whole and rounded up otherwise (see
// keyrate.Policy.Exact). The script's clock has whole µs, 1000·s Policy
// ticks; dividing both by g = gcd(P, 1000·s) gives the script's tick, of
// 1/k µs with k = 1000·s/g, and its interval I = P/g. Every quantity the
// script handles is then a whole number of its ticks, and each decision is
// the same rational number Policy computes, rounded the same way.
func compileUnits(l keyrate.Limit) (units, error) {
	if err := l.Validate(); err != nil {
		return units{}, err
	}
	pol, err := keyrate.NewPolicy(l, nil)
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
// up, without overflow: d.micros is below 2^53, so d.micros·1000 is below
// 2^63.
func (u *units) nanos(d debt, extra int64) time.Duration {
	return time.Duration(d.micros*nsPerMicro + ceilDiv((d.ticks+extra)*nsPerMicro, u.k))
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
// after it, as keyrate.Policy.Decide does.
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
// keyrate.Policy.Peek does.
func (u *units) peek(d debt) keyrate.Decision {
	t, ok := u.ticks(d)
	allowed := ok && t+u.interval <= u.fill
	return u.decide(d, 1, allowed)
}
