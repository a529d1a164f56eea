package redisbucket

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keyrate/keyrate"
	"github.com/keyrate/keyrate/internal/rules"
	"github.com/keyrate/keyrate/internal/wrap"
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
	// is at most 2^53 µs: maxMicros + F/K after a spend, and the script
	// caps a carried one there.
	maxMicros = 1 << 52
	// nsPerMicro converts the server's µs clock to keyrate's ns.
	nsPerMicro = 1000
	// timeSourceTTL is the least TTL of a key under WithTimeSource, whose
	// time need not keep pace with the server's clock that expires keys.
	timeSourceTTL = time.Hour
)

// gcraSource is the one script every call runs: GCRA on a theoretical
// arrival time (TAT) per window of the key's policy, all or nothing, as
// rules.Rules does in process, each window in integer ticks of 1/K µs.
//
// KEYS[1] is the bucket. ARGV is now in µs ("-1": the server's TIME), the
// cost (0: peek, which writes nothing; below 0: a refund of −cost), the
// least TTL in ms, the policy's descriptor, the descriptor of the window a
// one-window value is under (base), the mode ("" for a spend, a peek or a
// refund; "R:u:x" for a reservation, "C:hi:lo" for a cancel: see below),
// then K, I, G and F of each window: K ticks per µs, I ticks per token, G
// ticks of rules.Rule per tick, F ticks to fill an empty bucket. A
// descriptor lists its windows as "K:I:G:F", joined by ",". A call of the
// policy whose one window is base, with the mode "", sends the short
// form, two fewer arguments for the common case: now, the cost, the least
// TTL, K, I, G and F, then the descriptor.
//
// The value is "desc/a:b:r,a:b:r,...": the descriptor of the windows the
// states are under, then each window's TAT, a whole µs plus b ticks (0 ≤ b
// < K) less r ticks of rules.Rule (0 ≤ r < G, nonzero only after a
// change of policy: keyrate rounds a carried state to its own, finer,
// ticks). Every value is written so, the default policy's too, so that it
// records the limits that wrote it: a process started with another default
// (a rolling deploy that changes it) reads it as a change of policy and
// carries it, as a key moved to another tier is. A value "a:b", which the
// versions before this one wrote for a window of their default policy
// (r = 0), records no limits: it is read as under base, the reader's own
// default, as those versions read it. No value is a full bucket. A write
// sets the value with PX at the time the
// last window will be full again, rounded up to a whole ms (or the least
// TTL, if longer; at least 1 ms), so idle keys delete themselves. A full
// window that a refund leaves full keeps its TAT, as rules.Rule.Refund
// does; the two differ only once the clock has gone back. A refund gives
// nothing back while any window owes more than its fill time (a debt above
// F: tokens promised to reservations whose slots have not come, or a debt
// carried over from a larger limit), as rules.Rules.Refund does, since a
// new request could then share a reserved slot.
//
// A value under another descriptor (the policy changed, or the key moved
// to another tier, or another process's default differs) is carried over
// to the policy's windows first, as rules.Rules.Carry does
// (docs/design/carry.md; carryLua reads what the old windows owe): each
// new window owes the most that an old window it matches by length owes
// (match), counted as spent at now. Into a token bucket, a token bucket's
// debt carries in rules.Rule's ticks of the new window rounded up, capped
// at 2^62 of them (and at a TAT of 2^53 µs, which only a clock past the
// year 2109 reaches), which takes products beyond 2^53, so it is done on
// integers of 24-bit limbs (big, mul, add, divmod, num); a window
// algorithm's whole count carries as that many tokens (tokens); the
// largest result wins (later). A full window stays full. A spend or a
// refund writes the carried states, even when the spend is denied.
//
// A value no call writes is malformed: not of that form, b ≥ K, r ≥ G, a
// TAT beyond 2^53 µs, a descriptor out of range, or a key of another type
// (GET answers WRONGTYPE). The script then answers as for an empty bucket
// at now (a debt of F in every window), which never admits more than the
// limits, and a spend or a refund overwrites the value, so the key heals;
// a peek writes nothing.
//
// It returns {denied, malformed, du, db, r for each window}: the index of
// the first window that denied a spend (-1 when allowed, and for a peek or
// a refund; for a reservation, the window that needs the longest wait),
// 1 if the value was malformed, and each window's debt (TAT −
// now, 0 for a full window) after the call, in whole µs du plus db ticks
// less r ticks of rules.Rule. du is at most 2^53 (a TAT of at most 2^53
// µs, read at now = 0). Go turns the debts into rules.States, and
// rules.Rules builds the Decision.
//
// A reservation ("R:u:x", cost > 0) is rules.Rules.Reserve: a spend
// allowed past the fill time by at most a maximum wait. Each window's need
// is its debt after the spend less F, in whole µs and rules.Rule's ticks;
// the slot is the largest need, exact for one window, rounded up to a whole
// ns for several. The maximum wait is u µs plus x: for one window x is in
// rules.Rule's ticks, and u µs plus x is rules.Rule.WaitTicks of the
// wait (which caps it at 2^62 ticks less the fill time); for several it is
// in ns. A slot at now is a spend; one within the wait spends from every
// window as if made at the slot (one window: TAT' = TAT + c·I; several:
// TAT' = max(TAT, slot) + c·I, the slot written in each window's ticks
// less r); a slot beyond it, or one that would leave a window owing more
// than 2^62 of rules.Rule's ticks or put a TAT past 2^53 µs, reserves
// nothing. Its reply ends with now in µs, so that Go can name the
// state the reservation left in window 0 (Store.Cancel).
//
// A cancel ("C:hi:lo", cost the reservation's) gives back c·I in every
// window, and writes the result, iff the value is under the descriptor
// given (not malformed, not another policy's), window 0's TAT in
// rules.Rule's ticks since the Unix epoch is hi·2^32 + lo modulo 2^64,
// and some window still owes more than its fill time (TAT − now > F): for
// the latest reservation on the key, exactly when its slot has not come.
// It returns {1} if it gave the tokens back, and otherwise {0}, writing
// nothing.
// The products (wide: u µs plus x of rules.Rule's ticks, as a number of
// those ticks) are taken on 32-bit halves, each exact in a double.
//
// A window of a window algorithm (keyrate.FixedWindow, SlidingWindow) has
// the descriptor "0:W:N:A" (K = 0 marks it): its length W in µs, its limit
// N, and A = 1 for the fixed window, 2 for the sliding one; its state is
// "i:p:q", the index of its window, ⌊t/W⌋ of the Unix epoch's µs t (of
// the time source's), the count of window i − 1 and that of window i.
// Read at now, a state of an earlier window moves to now's (the count of
// i − 1 becoming the previous one), and a state of a later window (a
// carried-over debt) admits nothing. A spend of c is allowed iff q + c ≤
// N and, for the sliding window, p·(W − e) ≤ (N − q − c)·W with e = now
// mod W; it adds c to q. The fixed window keeps p only for a carry to
// another limit (below). A refund takes c off q, and for the sliding
// window what is left of it off p, as keyrate does; a peek writes
// nothing. Its key lives until its counts no longer weigh: the end of
// window i + 1 for q, of window i for p, in whole ms. Its reply is (k, p,
// q), the window k ≥ 0 after now's that it counts in and the counts, and
// the reply ends with now in µs, so that Go can place it (see plan.lcm).
// A value of an earlier version, which kept no p for a fixed window,
// reads as p = 0. Carried over from another limit, a window keeps its
// counts if it had the same algorithm and length, they fit the new N and
// it owes the most of the windows it matches, and otherwise owes what
// rules.Rules.Carry counts (owed): the cost counted against it, q +
// ⌈p·(W − e)/W⌉, for both algorithms, and for a state counted ahead N for
// each window it no longer holds and for the one before now's (weighted;
// N stands for a fixed window's previous count too, which an earlier
// version did not keep), as spent at now, N to a window from now's,
// spilling into the windows after it (the one before each counting N),
// saturating at a window start of 2^53 µs (spill); a token bucket carried
// from a window owes that cost in tokens. Reservations (modes R
// and C) are refused under a policy with a window algorithm.
//
// The common case, one window under base with its value missing, under
// base with r = 0 ("desc/a:b:0", found by a plain comparison of the
// value's start with the descriptor) or "a:b", a spend or a peek, is
// decided first, as the version before policies decided it, at its cost:
// the rest of the script allocates tables and closures that made it a
// third slower. So is a spend or a peek of a policy of one
// window algorithm's window whose value is missing or under its
// descriptor.
//
// A value of logScript's (a keyrate.SlidingLog policy's, "~W:N:te:base;"
// and its entries: see logSource) found under another policy is carried
// as rules.Rules.Carry carries a log: every window owes the cost of its
// entries still in the window at the later of now and the log's clock te,
// whole, counted as spent from then (logOwed). It is not malformed.
//
// Numbers go to redis.call through string.format('%d'), which is exact
// for integers below 2^63 (a cast to a C long) and cheaper than '%.0f',
// never through Lua's number-to-string conversion (14 significant
// digits).
const gcraSource = `

local now
if ARGV[1] == '-1' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
if now > 4503599627370496 then now = 4503599627370496 end
local cost = tonumber(ARGV[2])
local v = redis.pcall('GET', KEYS[1])
local short = #ARGV == 8
if (short or (ARGV[4] == ARGV[5] and ARGV[6] == '')) and cost >= 0 and type(v) ~= 'table' then
  local o = short and 3 or 6
  local d = short and ARGV[8] or ARGV[4]
  local K, I, F = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 4])
  local a, b = 0, 0
  if v then
    if string.find(v, d, 1, true) == 1 then
      a, b = string.match(v, '^/(%d+):(%d+):0$', #d + 1)
    else
      a, b = string.match(v, '^(%d+):(%d+)$')
    end
    if a and #a <= 16 and #b <= 16 and (#a < 16 or a <= '9007199254740992') then
      a, b = tonumber(a), tonumber(b)
    else
      a = nil
    end
  end
  if a and b < K then
    local du, db = 0, 0
    if a > now or (a == now and b > 0) then du, db = a - now, b end
    if cost == 0 or du * K > F or du * K + db + cost * I > F then return {cost == 0 and -1 or 0, 0, du, db, 0} end
    local nd = du * K + db + cost * I
    db = math.fmod(nd, K)
    du = (nd - db) / K
    local us = math.fmod(du, 1000)
    local ttl = (du - us) / 1000
    if us > 0 or db > 0 then ttl = ttl + 1 end
    ttl = math.max(ttl, tonumber(ARGV[3]), 1)
    redis.call('SET', KEYS[1], string.format('%s/%d:%d:0', d, now + du, db), 'PX', string.format('%d', ttl))
    return {-1, 0, du, db, 0}
  end
end
if #ARGV == 10 and ARGV[7] == '0' and ARGV[6] == '' and cost >= 0 and type(v) ~= 'table' then
  local w, N, a = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  local idx, p, q, ok = 0, 0, 0, true
  if v then
    local desc, x, y, z = string.match(v, '^([^/]*)/(%d+):(%d+):(%d+)$')
    ok = desc == ARGV[4] and #x <= 16 and #y <= 16 and #z <= 16
    if ok then
      idx, p, q = tonumber(x), tonumber(y), tonumber(z)
      ok = p <= N and q <= N and idx * w <= 9007199254740992
    end
  end
  if ok then
    local e = math.fmod(now, w)
    local iw = (now - e) / w
    local k = 0
    if idx > iw then
      k = idx - iw
    elseif idx == iw - 1 then
      p, q = q, 0
    elseif idx < iw then
      p, q = 0, 0
    end
    if cost == 0 then return {-1, 0, k, p, q, now} end
    if k > 0 or q + cost > N or (a == 2 and p > 0 and p * (w - e) > (N - q - cost) * w) then return {0, 0, k, p, q, now} end
    q = q + cost
    local us = 2 * w - e
    local r = math.fmod(us, 1000)
    local ttl = (us - r) / 1000
    if r > 0 then ttl = ttl + 1 end
    ttl = math.max(ttl, tonumber(ARGV[3]), 1)
    redis.call('SET', KEYS[1], ARGV[4] .. '/' .. string.format('%d:%d:%d', iw, p, q), 'PX', string.format('%d', ttl))
    return {-1, 0, 0, p, q, now}
  end
end
local A = ARGV
if short then
  A = {ARGV[1], ARGV[2], ARGV[3], ARGV[8], ARGV[8], '', ARGV[4], ARGV[5], ARGV[6], ARGV[7]}
end
local want, base = A[4], A[5]
local mode, m1, m2 = string.match(A[6], '^([RC]):(%d+):(%d+)$')
local n = (#A - 6) / 4
local W, D, bad, moved, wins = {}, {}, 0, false, false
for i = 1, n do
  local j = 4 * i + 3
  W[i] = {tonumber(A[j]), tonumber(A[j + 1]), tonumber(A[j + 2]), tonumber(A[j + 3])}
  D[i] = {0, 0, 0}
  if W[i][1] == 0 then wins = true end
end
if wins and mode then return redis.error_reply('keyrate: no reservation under a window algorithm') end

` + carryLua + `
local function fits(w, d, c)
  local N, p, q = w[3], d[2], d[3] + c
  if d[1] > 0 or q > N then return false end
  if w[4] == 1 or p == 0 then return true end
  return p * (w[2] - math.fmod(now, w[2])) <= (N - q) * w[2]
end

local function debt(t, w, r)
  local b = math.fmod(t, w[1])
  return {(t - b) / w[1], b, r}
end

local function carry(o, s, w)
  if s[1] == 0 and s[2] == 0 then return {0, 0, 0} end
  local R = 16777216
  local function big(x)
    local t = {}
    while x > 0 do
      local l = x % R
      t[#t + 1] = l
      x = (x - l) / R
    end
    return t
  end
  local function add(a, c)
    local t = {}
    for i = 1, #a do
      local x = a[i] + c
      c = math.floor(x / R)
      t[i] = x - c * R
    end
    for _, l in ipairs(big(c)) do t[#t + 1] = l end
    return t
  end
  local function mul(a, b)
    local t = {}
    for i = 1, #a + #b do t[i] = 0 end
    for i = 1, #a do
      local c = 0
      for j = 1, #b do
        local x = t[i + j - 1] + a[i] * b[j] + c
        c = math.floor(x / R)
        t[i + j - 1] = x - c * R
      end
      t[i + #b] = c
    end
    while t[#t] == 0 do t[#t] = nil end
    return t
  end
  local function divmod(a, d)
    local q, r = {}, 0
    for i = #a, 1, -1 do
      if d < 16384 then
        local x = r * R + a[i]
        q[i] = math.floor(x / d)
        r = x - q[i] * d
      else
        local l, x = 0, a[i]
        for k = 23, 0, -1 do
          local bit = x >= 2 ^ k and 1 or 0
          x = x - bit * 2 ^ k
          r, l = 2 * r + bit, 2 * l
          if r >= d then r, l = r - d, l + 1 end
        end
        q[i] = l
      end
    end
    while q[#q] == 0 do q[#q] = nil end
    return q, r
  end
  local function num(a)
    local x = 0
    for i = #a, 1, -1 do x = x * R + a[i] end
    return x
  end
  local kg, c, du = o[1] * o[3], s[2] * o[3] - s[3], s[1]
  if c < 0 then du, c = du - 1, c + kg end
  local x = mul(mul(add(mul(big(du), big(kg)), c), big(w[2])), big(w[3]))
  local q, r1 = divmod(x, o[3])
  local y, r2 = divmod(q, o[2])
  if r1 > 0 or r2 > 0 then y = add(y, 1) end
  if #y > 3 or (#y == 3 and (y[3] > 16384 or (y[3] == 16384 and y[2] + y[1] > 0))) then y = {0, 0, 16384} end
  local u, v = divmod(y, w[1] * w[3])
  c = math.floor((v + w[3] - 1) / w[3])
  local d = {num(u), c, c * w[3] - v}
  if c == w[1] then d = {d[1] + 1, 0, d[3]} end
  if d[1] > 9007199254740992 - now then d = {9007199254740992 - now, 0, 0} end
  return d
end

-- later reports whether the token-bucket state x (debt du, db less r) owes
-- more than y, in a window of G rules.Rule ticks a tick.
local function later(x, y, G)
  if x[1] ~= y[1] then return x[1] > y[1] end
  return x[2] * G - x[3] > y[2] * G - y[3]
end

if type(v) == 'table' then
  if string.sub(v.err or '', 1, 9) ~= 'WRONGTYPE' then
    return redis.error_reply(v.err or 'keyrate: GET failed')
  end
  bad = 1
elseif v and string.byte(v, 1) == 126 then
  -- a log's (logSource): every window owes the cost in its window, whole,
  -- counted from the later of now and the log's clock
  local u, te = logOwed(v)
  if not u then
    bad = 1
  else
    moved = true
    local from = math.max(now, te)
    for j = 1, n do
      if u > 0 then D[j] = W[j][1] > 0 and tokens(u, from, W[j]) or spill(u, from, W[j]) end
    end
  end
elseif v then
  local O, old, desc = parse(v, base, want, W)
  if not O then
    bad = 1
  elseif desc == want then
    for i = 1, n do D[i] = old[i] end
  else
    moved = true
    for j = 1, n do
      local w, C = W[j], match(O, W, j)
      local d, keep = 0, nil
      for _, i in ipairs(C) do d = math.max(d, owed(O[i], old[i])) end
      if w[1] == 0 then
        -- a window of the same algorithm and length keeps its counts, if
        -- they fit and it owes the most
        for _, i in ipairs(C) do
          local o, s = O[i], old[i]
          if not keep and o[1] == 0 and o[2] == w[2] and o[4] == w[4] and s[2] <= w[3] and s[3] <= w[3] and owed(o, s) == d then keep = i end
        end
        D[j] = keep and {old[keep][1], old[keep][2], old[keep][3]} or spill(d, now, w)
      else
        local best = {0, 0, 0}
        for _, i in ipairs(C) do
          local x = O[i][1] > 0 and carry(O[i], old[i], w) or tokens(owed(O[i], old[i]), now, w)
          if later(x, best, w[3]) then best = x end
        end
        D[j] = best
      end
    end
  end
end
local P = 4294967296
local function wide(u, x, kg)
  local lo = (u % P) * kg + x
  local c = math.floor(lo / P)
  return (u - u % P) / P * kg + c, lo - c * P
end

if mode == 'C' then
  if not v or bad == 1 or moved then return {0} end
  local K, G, d = W[1][1], W[1][3], D[1]
  local hi, lo = wide(d[4] or now + d[1], (d[5] or d[2]) * G - (d[6] or d[3]), K * G)
  if hi % P ~= tonumber(m1) or lo ~= tonumber(m2) then return {0} end
  local owed = false
  for i = 1, n do
    if D[i][1] * W[i][1] + D[i][2] > W[i][4] then owed = true end
  end
  if not owed then return {0} end
  for i = 1, n do
    local k, back, e = W[i][1], cost * W[i][2], D[i]
    local bb = back % k
    local u, b, r = (e[4] or now + e[1]) - (back - bb) / k, (e[5] or e[2]) - bb, e[6] or e[3]
    if b < 0 then u, b = u - 1, b + k end
    if u < 0 then u, b, r = 0, 0, 0 end
    D[i] = {0, 0, 0, u, b, r}
    if u > now or (u == now and b > 0) then D[i] = {u - now, b, r} end
  end
end
if bad == 1 then
  for i = 1, n do
    D[i] = W[i][1] == 0 and {0, 0, W[i][3]} or debt(W[i][4], W[i], 0)
  end
end

local function ticks(i)
  if D[i][1] * W[i][1] > W[i][4] then return nil end
  return D[i][1] * W[i][1] + D[i][2]
end
local function put()
  local T, ttl = {}, math.max(tonumber(A[3]), 1)
  for i = 1, n do
    local d, w = D[i], W[i]
    local us = d[1]
    if w[1] == 0 then
      local start = now - math.fmod(now, w[2]) + d[1] * w[2]
      T[i] = string.format('%d:%d:%d', start / w[2], d[2], d[3])
      us = start - now
      if d[3] > 0 then us = us + 2 * w[2] elseif d[2] > 0 then us = us + w[2] end
      us = math.max(us, 0)
    else
      T[i] = string.format('%d:%d:%d', d[4] or now + d[1], d[5] or d[2], d[6] or d[3])
    end
    local r = math.fmod(us, 1000)
    local ms = (us - r) / 1000
    if r > 0 or (w[1] > 0 and d[2] > 0) then ms = ms + 1 end
    if ms > ttl then ttl = ms end
  end
  redis.call('SET', KEYS[1], want .. '/' .. table.concat(T, ','), 'PX', string.format('%d', ttl))
end

local denied = -1
if mode == 'C' then
  put()
  return {1}
elseif cost > 0 and mode == 'R' then
  local wu, wx, su, sx = tonumber(m1), tonumber(m2), 0, 0
  for i = 1, n do
    local k, g, d = W[i][1], W[i][3], D[i]
    local m = W[i][4] - cost * W[i][2]
    local u, x = d[1] - (m - m % k) / k, (d[2] - m % k) * g - d[3]
    if x < 0 then u, x = u - 1, x + k * g end
    if u >= 0 and u + x > 0 then
      if n > 1 then
        local s = k * g / 1000
        x = (x + s - 1 - (x + s - 1) % s) / s
        if x == 1000 then u, x = u + 1, 0 end
      end
      if u > su or (u == su and x > sx) then su, sx, denied = u, x, i - 1 end
    end
  end
  if denied >= 0 and su <= wu and (su < wu or sx <= wx) then
    local N = {}
    for i = 1, n do
      local k, g, e = W[i][1], W[i][3], D[i]
      local du, db, r = e[1], e[2], e[3]
      if n > 1 then
        local y = sx * k * g / 1000
        local c, u = (y + g - 1 - (y + g - 1) % g) / g, su
        local rr = c * g - y
        if c == k then u, c = u + 1, 0 end
        local l = du - u
        if l < -1 or (l <= 1 and l * k * g + (db - c) * g - r + rr < 0) then du, db, r = u, c, rr end
      end
      local back = cost * W[i][2]
      du, db = du + (back - back % k) / k, db + back % k
      if db >= k then du, db = du + 1, db - k end
      local hi, lo = wide(du, db * g - r, k * g)
      if hi > 1073741824 or (hi == 1073741824 and lo > 0) or now + du > 9007199254740992 then break end
      N[i] = {du, db, r}
    end
    if #N == n then
      D, denied = N, -1
    end
  elseif denied < 0 then
    for i = 1, n do D[i] = debt(ticks(i) + cost * W[i][2], W[i], D[i][3]) end
  end
  if denied < 0 or moved or bad == 1 then put() end
elseif cost > 0 then
  for i = 1, n do
    local t = W[i][1] > 0 and ticks(i)
    if (W[i][1] == 0 and not fits(W[i], D[i], cost)) or (W[i][1] > 0 and (not t or t + cost * W[i][2] > W[i][4])) then
      denied = i - 1
      break
    end
  end
  for i = 1, (denied < 0 and n or 0) do
    if W[i][1] == 0 then
      D[i] = {D[i][1], D[i][2], D[i][3] + cost}
    else
      D[i] = debt(ticks(i) + cost * W[i][2], W[i], D[i][3])
    end
  end
  if denied < 0 or moved or bad == 1 then put() end
elseif cost < 0 and v then
  local owed = false
  for i = 1, n do
    if W[i][1] == 0 then
      if (D[i][1] > 0 and D[i][2] + D[i][3] > 0) or (D[i][1] == 0 and not fits(W[i], D[i], 0)) then owed = true end
    else
      local t = ticks(i)
      if not t or t > W[i][4] then owed = true end
    end
  end
  for i = 1, (owed and 0 or n) do
    local back, t = -cost * W[i][2], W[i][1] > 0 and ticks(i)
    if W[i][1] == 0 then
      local d, c = D[i], -cost
      local b = math.min(c, d[3])
      local more = W[i][4] == 2 and math.min(c - b, d[2]) or 0
      D[i] = {d[1], d[2] - more, d[3] - b}
    elseif t > 0 and back >= t then
      D[i] = {0, 0, 0}
    elseif t > 0 then
      D[i] = debt(t - back, W[i], D[i][3])
    end
  end
  put()
end
local out = {denied, bad}
for i = 1, n do
  for j = 1, 3 do out[#out + 1] = D[i][j] end
end
if mode == 'R' or wins then out[#out + 1] = now end
return out
`

// gcraScript is gcraSource with its SHA1, which calls send (see call.go).
var gcraScript = redis.NewScript(gcraSource)

// units is a Limit compiled for the script. A token bucket's time is in
// ticks of 1/k µs, with the same token interval as rules.Rule, so that
// decisions are equal. A window algorithm's (win > 0) is in whole µs.
type units struct {
	k        int64  // ticks per µs
	interval int64  // ticks per token
	fill     int64  // ticks to fill an empty bucket
	g        uint64 // rules.Rule's ticks per tick

	// A window algorithm's window: its length in µs (0 for a token
	// bucket), its limit N, and its algorithm.
	win int64
	n   int64
	alg keyrate.Algorithm
}

// compileUnits validates l for keyrate (limit.Validate) and for the script,
// returning an error wrapping keyrate.ErrInvalidLimit that names the bound.
//
// rules.Rule counts time in ticks of 1/s ns and a token as P ticks, P
// being Per·s/Rate when that is whole and rounded up otherwise (see
// rules.Rule.Exact). The script's clock has whole µs, 1000·s Rule
// ticks; dividing both by g = gcd(P, 1000·s) gives the script's tick, of
// 1/k µs with k = 1000·s/g, and its interval I = P/g. Every quantity the
// script handles is then a whole number of its ticks, and each decision is
// the same rational number keyrate computes, rounded the same way. Only a
// state carried over from another policy can fall between two of the
// script's ticks, which is what its r counts.
func compileUnits(l keyrate.Limit) (units, error) {
	if err := l.Validate(); err != nil {
		return units{}, err
	}
	switch l.Algorithm {
	case keyrate.TokenBucket:
	case keyrate.FixedWindow, keyrate.SlidingWindow:
		return compileWindow(l)
	case keyrate.SlidingLog:
		return compileLog(l)
	default:
		return units{}, wrap.Errorf("%w: %w: algorithm %v: redisbucket's scripts run token-bucket, fixed-window, sliding-window and sliding-log only",
			keyrate.ErrUnsupportedAlgorithm, keyrate.ErrInvalidLimit, l.Algorithm)
	}
	pol, err := rules.NewRule(l, nil)
	if err != nil {
		return units{}, err
	}
	s := pol.Scale()
	hi, lo := bits.Mul64(uint64(l.Per), s)
	q, r := bits.Div64(hi, lo, uint64(l.Rate)) // hi < Rate: Validate bounds it
	if r != 0 {
		q++ // rules.Rule rounds a coarse interval up
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
	return units{k: k, interval: interval, fill: int64(l.Burst) * interval, g: g}, nil
}

// compileWindow is compileUnits for a window algorithm's limit, valid for
// keyrate: the script counts time in whole µs, so Per must be one, and it
// compares the sliding window's weighted counts, at most Rate·Per in µs,
// in doubles, so that must be at most 2^53.
func compileWindow(l keyrate.Limit) (units, error) {
	if l.Per%time.Microsecond != 0 {
		return units{}, fmt.Errorf("%w: %v window of %v: redisbucket needs a whole number of µs, the server clock's resolution",
			keyrate.ErrInvalidLimit, l.Algorithm, l.Per)
	}
	w := int64(l.Per / time.Microsecond)
	if hi, lo := bits.Mul64(uint64(l.Rate), uint64(w)); hi != 0 || lo > maxWeighted {
		return units{}, fmt.Errorf("%w: Rate %d is too many for a %v window of %v in redisbucket: Rate times the window in µs must be at most 2^53, here at most %d",
			keyrate.ErrInvalidLimit, l.Rate, l.Algorithm, l.Per, maxWeighted/w)
	}
	return units{win: w, n: int64(l.Rate), alg: l.Algorithm}, nil
}

// maxWeighted bounds a window's Rate·Per in µs: the script's largest
// product, exact in a double.
const maxWeighted = 1 << 53

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// desc returns u as the script's descriptor of a window, "K:I:G:F"; a
// window algorithm's is "0:W:N:A", with W its length in µs and A 1 for a
// fixed window, 2 for a sliding one; a log's, "~W:N" (logScript's).
func (u units) desc() string {
	if u.alg == keyrate.SlidingLog {
		return fmt.Sprintf("~%d:%d", u.win, u.n)
	}
	k, i, g, f := u.args()
	return fmt.Sprintf("%d:%d:%d:%d", k, i, g, f)
}

// args returns the four numbers of u's descriptor.
func (u units) args() (k, i int64, g uint64, f int64) {
	if u.win > 0 {
		a := int64(1)
		if u.alg == keyrate.SlidingWindow {
			a = 2
		}
		return 0, u.win, uint64(u.n), a
	}
	return u.k, u.interval, u.g, u.fill
}

// state packs a window's counts as rules.Rule does (see keyrate's
// window.go): with b = bits.Len(N), the window index above the counts,
// each in b bits, the previous window's above the current one's.
// TestWindowState pins the layout against keyrate's.
func (u units) state(idx, prev, cur uint64) rules.State {
	b := uint(bits.Len64(uint64(u.n)))
	idx = min(idx, 1<<(63-2*b)-1)
	return rules.State(idx<<(2*b) | prev<<b | cur)
}

// maxLCM bounds the least common multiple of a policy's window
// algorithms' lengths (see plan.lcm).
const maxLCM = 365 * 24 * time.Hour

// plan is a policy compiled for the script: its descriptor and arguments,
// and each window's units, to read the script's reply.
type plan struct {
	desc    string
	descArg any   // desc, boxed once for every call
	args    []any // K, I, G and F of each window
	units   []units
	// log is whether the policy is one keyrate.SlidingLog window, which
	// logScript runs (its args are W and N).
	log bool
	// short is whether the plan is the one window base (see gcraScript's
	// short form); Store.plan sets it.
	short bool
	// lcm is the least common multiple of the lengths of the policy's
	// window algorithms' windows (0 if it has none). rules.Rules reads
	// their states at a reading t0 in [lcm, 2·lcm) congruent to the
	// server's now (in ns since the Unix epoch) modulo lcm: every window
	// then starts where it does on the server, and the previous one is
	// there too. Token buckets' states are read at t0 as at 0.
	lcm time.Duration
	// local is the policy compiled for the store's local clock (the time
	// source, or clock.System()): the Rules of the reservations made under
	// it, on whose clock Reservation.Wait sleeps. Store.plan sets it.
	local *rules.Rules
	// multi is the arguments of Store.AllowAllContext's one call
	// (multikey.go), in a plan that stands for that call alone; nil in a
	// policy's.
	multi []any
}

// newPlan compiles p for the script, or returns an error wrapping
// keyrate.ErrInvalidPolicy (and keyrate.ErrInvalidLimit for a window) that
// names what is out of range for keyrate or for the script. An unlimited
// p has no windows.
func newPlan(p keyrate.Policy) (*plan, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	pl := &plan{units: make([]units, len(p.Limits))}
	desc := make([]string, len(p.Limits))
	for i, l := range p.Limits {
		u, err := compileUnits(l)
		if err != nil {
			return nil, wrap.Errorf("%w: %q window %d (%v): %w", keyrate.ErrInvalidPolicy, p.Name, i, l, err)
		}
		pl.units[i], desc[i] = u, u.desc()
		if u.alg == keyrate.SlidingLog { // its policy's only window
			pl.log, pl.args = true, []any{u.win, u.n}
			continue
		}
		k, in, g, f := u.args()
		pl.args = append(pl.args, k, in, g, f)
		if u.win > 0 {
			if pl.lcm == 0 {
				pl.lcm = l.Per
			} else if pl.lcm = lcm(pl.lcm, l.Per); pl.lcm > maxLCM || pl.lcm <= 0 {
				return nil, fmt.Errorf("%w: %q: the lengths of its windows have no common multiple within %v, which redisbucket needs to align them",
					keyrate.ErrInvalidPolicy, p.Name, maxLCM)
			}
		}
	}
	pl.desc = strings.Join(desc, ",")
	pl.descArg = pl.desc
	return pl, nil
}

// lcm returns the least common multiple of a and b, or -1 past the
// longest time.Duration.
func lcm(a, b time.Duration) time.Duration {
	m := a / time.Duration(gcd(uint64(a), uint64(b)))
	hi, lo := bits.Mul64(uint64(m), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return -1
	}
	return time.Duration(lo)
}

// maxAhead bounds the windows a window algorithm's state may count ahead
// of now's (a debt carried over from another limit, spilled past N): the
// script keeps a window's start within 2^53 µs.
const maxAhead = 1 << 53

// maxDebtMicros bounds the whole µs of a debt the script returns: a TAT of
// at most 2^53 µs, read at now = 0.
const maxDebtMicros = 1 << 53

// maxDebt bounds a debt in rules.Rule's ticks, which saturates there
// (only a clock set back by decades reaches it): keyrate adds a spend of
// at most 2^62 ticks to a debt, which must not wrap.
const maxDebt = 1 << 63

// read checks the script's reply res for p and converts it: it writes each
// window's state into st, as rules.Rules reads it at the reading t0 it
// returns (0 for a policy of token buckets only: each window's debt in
// rules.Rule's ticks; see plan.lcm for window algorithms), and returns
// the denying window (-1 if none) and whether the value was malformed. It
// returns an error for a reply the script cannot give, so that no
// Decision built from it can hold a negative or wrapped duration. The
// reply holds extra values after the windows' (a reservation's now, or
// the now of a policy with window algorithms, which is last), which read
// checks only for number and range (0 to maxMicros).
func (p *plan) read(res []int64, st []rules.State, extra int) (denied int, t0 time.Duration, malformed bool, err error) {
	n := len(p.units)
	if len(res) != 2+3*n+extra {
		return 0, 0, false, fmt.Errorf("script returned %d values, want %d", len(res), 2+3*n+extra)
	}
	for _, x := range res[2+3*n:] {
		if x < 0 || x > maxMicros {
			return 0, 0, false, fmt.Errorf("script returned %v, out of range", res)
		}
	}
	if res[0] < -1 || res[0] >= int64(n) || res[1] < 0 || res[1] > 1 {
		return 0, 0, false, fmt.Errorf("script returned %v, out of range", res)
	}
	if p.lcm > 0 {
		if extra < 1 {
			return 0, 0, false, fmt.Errorf("script returned %v, without now", res)
		}
		t0 = p.lcm + time.Duration(res[len(res)-1])*time.Microsecond%p.lcm
	}
	for i, u := range p.units {
		du, db, r := res[2+3*i], res[3+3*i], res[4+3*i]
		if u.win > 0 { // ahead, previous and current counts
			if du < 0 || du > maxAhead || db < 0 || db > u.n || r < 0 || r > u.n {
				return 0, 0, false, fmt.Errorf("script returned %v, out of range", res)
			}
			st[i] = u.state(uint64(t0/(time.Duration(u.win)*time.Microsecond))+uint64(du), uint64(db), uint64(r))
			continue
		}
		if du < 0 || du > maxDebtMicros || db < 0 || db >= u.k || r < 0 || uint64(r) >= u.g || (du == 0 && db == 0 && r != 0) {
			return 0, 0, false, fmt.Errorf("script returned %v, out of range", res)
		}
		hi, lo := bits.Mul64(uint64(du), uint64(u.k)*u.g)
		d := uint64(maxDebt)
		if hi == 0 && lo < maxDebt {
			d = min(lo+uint64(db)*u.g-uint64(r), maxDebt)
		}
		if t0 > 0 { // at reading t0: rules.Rule's ticks of t0 later
			d += uint64(t0) * (uint64(u.k) * u.g / nsPerMicro)
		}
		st[i] = rules.State(d)
	}
	return int(res[0]), t0, res[1] == 1, nil
}
