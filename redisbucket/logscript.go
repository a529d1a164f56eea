package redisbucket

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/rules"
)

// MaxLogRate is the largest Rate of a keyrate.SlidingLog limit that New
// and SetPolicy accept: the script reads and writes a key's whole log on
// each spend (26 bytes an entry, one entry per µs that admitted within the
// window), so a log's memory and the server time of each call grow with
// N (Redis's GET of the string, and its copies when it is written): a
// full log is 26·N bytes, 26 KiB at 1024. A call on a full log took about
// 20–30µs of server time at N = 16; at N = 1024, 64µs when denied (the GET
// alone) and 250µs when it admitted (one entry leaving, one coming, the
// string written), by INFO commandstats, Redis 7.0 on a loaded 2-core VM:
// time during which the server serves no other key. keyrate.MaxLogRate,
// the in-process stores' bound, is larger.
const MaxLogRate = 1024

// maxLogDebt is the most cost a log carries (a debt carried from another
// policy, kept whole as keyrate's carry keeps it): its total counts mod
// 2^32.
const maxLogDebt = 1 << 31

// logEntry is the length of an entry of a log's value: its exit in µs in
// 16 digits, then the running total of the cost through it, modulo 2^32,
// in 10.
const logEntry = 26

// logSource is the script of a keyrate.SlidingLog policy (which has that
// one window): the log of the key's admissions still in the window, in a
// packed string, one call per decision on the server's TIME (or the time
// source's), as rules.Rules.LogSpend, LogRefund and LogView decide.
//
// KEYS[1] is the bucket's key. ARGV: now in µs (-1: the server's TIME),
// the cost (0: peek, which writes nothing; below 0: a refund of −cost),
// the least TTL in ms, the window W in µs, the limit N, and the store's
// base descriptor (see gcraSource).
//
// The value is "~W:N:te:base;" and then the entries, oldest first, each
// logEntry digits: the µs it leaves the window (its admission's µs plus
// W; admissions at one µs share an entry) and the running total of the
// cost through it modulo 2^32; te is the latest µs the log has seen (its
// clock: a request read earlier, a server clock stepped back, is decided
// at te, where the log counts at least as much), base the running total
// before the first entry. The entries are fixed-width, so that the script
// finds the first entry still in the window, and the entry a retry waits
// for, by binary search, drops the entries that left by moving an offset,
// and appends without parsing the rest: a denied spend or a peek copies
// nothing beyond Redis's reply.
//
// A request at now is decided at te' = max(te, now): the entries that
// left by te' are dropped, used is the cost of the others, and a spend of
// c is allowed iff used + c ≤ N; it adds an entry leaving at te' + W (or
// adds to the newest, if it leaves as late). A refund takes its cost off
// the newest entries. The key is written (with PX at the newest entry's
// exit, rounded up to a whole ms, or the least TTL if longer) by an
// allowed spend, a refund of a key that exists, and a spend that carried
// or healed the value; a denied spend and a peek write nothing.
//
// A value of another policy's log ("~W':N':...") is carried as
// rules.Rules.Carry carries a log into a log (docs/design/carry.md): its
// cost in the window at te', whole (above N if N is smaller, up to 2^31),
// on its newest entry if W' is W and the cost fits N, and otherwise as one
// entry counted as spent at te', which stays in the window ⌈cost/N⌉·W. A
// value of the token-bucket script (a string of digits, ':', ',' and '/':
// another policy of the key, or a tier; ARGV[6] is the store's base
// descriptor, for an "a:b" value) is carried as keyrate carries any
// policy into a log: the most any of its windows owes at now (carryLua's
// owed: a token bucket's debt in tokens, rounded up; a window
// algorithm's count), whole (up to 2^31), as one entry counted as spent
// at now, which stays ⌈debt/N⌉·W. A log counting more than N (such a
// debt) gives nothing back on a refund. A value of
// neither form, a log value out of range (a total above N, its first and
// last entries out of order, a length not a whole number of entries, an
// entry the script reads that is not a whole number: the script runs
// under pcall and starts again on that error), or a key of another type
// (WRONGTYPE), is malformed: read as N admitted at now (a full log, which
// never admits more than the limit), replaced by a spend or a refund.
// Entries the script does not read are not checked: a value no Store
// wrote can hold them out of order.
//
// It returns {denied, malformed, te' − now, used, full − now, retry −
// now}: 0 if a spend was denied (-1 otherwise), 1 if the value was
// malformed, and the summary rules.Rules reads (see internal/rules'
// log.go), relative to now, in µs: the clock, the cost in the window,
// the µs from which the log is empty (the later of its newest exit and
// te'), and the earliest µs at which the request (of a spend's cost, 1
// for a peek or a refund) fits.
const logSource = `
local now
if ARGV[1] == '-1' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
if now > 4503599627370496 then now = 4503599627370496 end
local cost, W, N = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
local P = 4294967296
local v = redis.pcall('GET', KEYS[1])
` + carryLua + `

-- a field of an entry: a whole number, or the value is malformed
local function num(s)
  local x = tonumber(s)
  if not x or x < 0 or x ~= math.floor(x) then error('keyrate: malformed log') end
  return x
end
-- The log being read: its entries are B's from byte O + 1 on, so that
-- dropping the oldest moves O and copies nothing.
local B, O = '', 0
local function count() return (#B - O) / 26 end
local function exit(k) return num(string.sub(B, O + (k - 1) * 26 + 1, O + (k - 1) * 26 + 16)) end
local function cum(k) return num(string.sub(B, O + (k - 1) * 26 + 17, O + k * 26)) end
local function entry(x, c) return string.format('%016d%010d', x, c) end
-- the entries but the newest k, copied
local function keep(k) return string.sub(B, O + 1, O + (count() - k) * 26) end
-- the first entry leaving after t, count() + 1 if none
local function first(t)
  local lo, hi = 1, count() + 1
  while lo < hi do
    local m = math.floor((lo + hi) / 2)
    if exit(m) > t then hi = m else lo = m + 1 end
  end
  return lo
end
local function used(bs)
  local n = count()
  if n == 0 then return 0 end
  return (cum(n) - bs) % P
end

local function run(bad)
local te, base, moved = now, 0, false
B, O = '', 0
if bad == 1 then
elseif type(v) == 'table' then
  if string.sub(v.err or '', 1, 9) ~= 'WRONGTYPE' then
    return redis.error_reply(v.err or 'keyrate: GET failed')
  end
  bad = 1
elseif v then
  local w, n, t, b, e = string.match(v, '^~(%d+):(%d+):(%d+):(%d+);()')
  if w and #w <= 16 and #n <= 6 and #t <= 16 and #b <= 10 then
    w, n, t, b = tonumber(w), tonumber(n), tonumber(t), tonumber(b)
    B, O = v, e - 1
    local k = count()
    if w < 1 or n < 1 or t > 9007199254740992 or b >= P or (#B - O) % 26 ~= 0 or k > n
      or (k > 0 and (exit(k) > 9007199254740992 or exit(1) > exit(k) or used(b) > 2147483648)) then
      bad = 1
    else
      te = math.max(t, now)
      local f = first(te)
      if f > 1 then b, O = cum(f - 1), O + (f - 1) * 26 end
      if w == W and n == N then
        base = b
      else
        -- another log: its cost in the window, whole, as one entry; kept on
        -- its newest admission if the window is as long and it fits N,
        -- else counted as spent at te', ceil(u/N) windows
        moved = true
        local u, x = used(b), 0
        if u > 0 then
          x = exit(count())
          if w ~= W or u > N then x = math.min(te + ceildiv(math.min(u, 2147483648), N) * W, 9007199254740992) end
        end
        B, O = '', 0
        if x > te then B = entry(x, math.min(u, 2147483648)) end
      end
    end
  elseif string.find(v, '^[%d:,/]+$') then
    -- a value of gcraSource: the most any of its windows owes, counted as
    -- spent at now, ceil(d/N) windows
    moved = true
    local Q, old = parse(v, ARGV[6], nil, nil)
    if not Q then
      bad = 1
    else
      local d = 0
      for i = 1, #Q do d = math.max(d, owed(Q[i], old[i])) end
      d = math.min(d, 2147483648)
      if d > 0 then B = entry(math.min(now + ceildiv(d, N) * W, 9007199254740992), d) end
    end
  else
    bad = 1
  end
end
if bad == 1 then
  te, base, B, O = now, 0, entry(now + W, N), 0
end

local n = count()
local u = used(base)
local denied, write = -1, moved or bad == 1
if cost > 0 then
  if u + cost <= N then
    local x = te + W
    if n > 0 and exit(n) >= x then
      B = keep(1) .. entry(exit(n), (cum(n) + cost) % P)
    else
      B = keep(0) .. entry(x, ((n > 0 and cum(n) or base) + cost) % P)
    end
    O, u, write = 0, u + cost, true
  else
    denied = 0
  end
elseif cost < 0 then
  -- a log counting more than N (a debt carried in) gives nothing back
  local c, k = u <= N and -cost or 0, 0
  local last = ''
  while c > 0 and n - k > 0 do
    local m = n - k
    local prev = m > 1 and cum(m - 1) or base
    local e = (cum(m) - prev) % P
    if e > c then
      last = entry(exit(m), (cum(m) - c) % P)
      k = k + 1
      break
    end
    k, c = k + 1, c - e
  end
  B, O = keep(k) .. last, 0
  u, write = used(base), v ~= false
else
  write = false
end
n = count()
local full = te
if n > 0 then full = math.max(te, exit(n)) end
local c = cost > 0 and cost or 1
local retry = te
if u + c > N then
  local need, lo, hi = u + c - N, 1, n
  while lo < hi do
    local m = math.floor((lo + hi) / 2)
    if (cum(m) - base) % P >= need then hi = m else lo = m + 1 end
  end
  retry = exit(lo)
end
if write then
  local us = full - now
  local r = math.fmod(us, 1000)
  local ttl = (us - r) / 1000
  if r > 0 then ttl = ttl + 1 end
  ttl = math.max(ttl, tonumber(ARGV[3]), 1)
  redis.call('SET', KEYS[1], string.format('~%d:%d:%d:%d;', W, N, te, base) .. string.sub(B, O + 1), 'PX', string.format('%d', ttl))
end
return {denied, bad, te - now, u, full - now, retry - now}
end

local ok, res = pcall(run, 0)
if ok then return res end
if type(res) == 'string' and string.find(res, 'keyrate: malformed log', 1, true) then return run(1) end
error(res)
`

// logScript is logSource with its SHA1.
var logScript = redis.NewScript(logSource)

// logSHA is logScript's SHA1, boxed once for every call.
var logSHA any = logScript.Hash()

// compileLog is compileUnits for a keyrate.SlidingLog limit, valid for
// keyrate: the script counts time in whole µs, so Per must be one, and
// it carries at most MaxLogRate entries.
func compileLog(l keyrate.Limit) (units, error) {
	if l.Per%time.Microsecond != 0 {
		return units{}, fmt.Errorf("%w: %v window of %v: redisbucket needs a whole number of µs, the server clock's resolution",
			keyrate.ErrInvalidLimit, l.Algorithm, l.Per)
	}
	if l.Rate > MaxLogRate {
		return units{}, fmt.Errorf("%w: Rate %d is above the most of %d a %v limit can count in redisbucket (redisbucket.MaxLogRate)",
			keyrate.ErrInvalidLimit, l.Rate, MaxLogRate, l.Algorithm)
	}
	return units{win: int64(l.Per / time.Microsecond), n: int64(l.Rate), alg: l.Algorithm}, nil
}

// readLog is read for a log policy's reply res: it writes the summary
// into st (rules.LogWords states, in rules.Rule's ns ticks relative to a
// reading of 0, which stands for the server's now).
func (p *plan) readLog(res []int64, st []rules.State) (denied int, malformed bool, err error) {
	if len(res) != 6 {
		return 0, false, fmt.Errorf("script returned %d values, want 6", len(res))
	}
	te, used, full, retry := res[2], res[3], res[4], res[5]
	if res[0] < -1 || res[0] > 0 || res[1] < 0 || res[1] > 1 || te < 0 || used < 0 || used > maxLogDebt ||
		full < te || retry < te || full > maxDebtMicros || retry > full {
		return 0, false, fmt.Errorf("script returned %v, out of range", res)
	}
	const ns = int64(time.Microsecond)
	st[0], st[1], st[2], st[3] = rules.State(te*ns), rules.State(used), rules.State(full*ns), rules.State(retry*ns)
	return int(res[0]), res[1] == 1, nil
}
