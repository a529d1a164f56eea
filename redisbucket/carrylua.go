package redisbucket

// carryLua is the part of gcraSource and logSource that reads a value
// another policy of the key wrote and works out what it owes: the debt out
// of rules.Rules.Carry (docs/design/carry.md), written once for both
// scripts, which run it after they have read now. Its functions:
//
//   - fields(s, m): the comma-separated fields of s, each m whole numbers
//     joined by ':', or nil;
//   - view(w, _, idx, p, q): a window algorithm's state (window idx of w
//     µs, counts p and q) as now sees it, {k, p, q}: k > 0 windows ahead of
//     now's, or now's window with its previous and current counts;
//   - parse(v, base, want, W): a value of gcraSource ("desc/states", or
//     "a:b" under the descriptor base): the old windows' descriptors O
//     (W itself if the value's descriptor is want), their states as now
//     sees them (a view for a window algorithm; {du, db, r}, the debt, for
//     a token bucket, or {0, 0, 0, a, b, r} if full), and the descriptor;
//     nil if it is malformed;
//   - owed(o, s): the whole tokens window o in state s owes at now, rounded
//     up (rules.Rule.Debt): a token bucket's debt; a window's count plus
//     the previous one's weighted by the part of now's window still to
//     come, and for a state counted ahead, every window it counts, those
//     it no longer holds as N (a fixed window's previous count too, which
//     a value of an earlier version did not keep);
//   - match(O, W, j): the old windows whose debts window j of W takes the
//     largest of: those of its length and those whose length W lacks, or
//     all if none has its length; a length is a window algorithm's W, a
//     token bucket's fill time F/K µs (rules.Rule.length);
//   - spill(d, from, w): the state of window algorithm w owing d counted as
//     spent at from: N to a window from from's, the rest in the windows
//     after it, as far as the value's bound on a window's start;
//   - tokens(d, from, w): the debt of token bucket w owing d whole tokens
//     counted as spent at from;
//   - logOwed(v): for a value of logSource, the cost of its admissions
//     still in the window at the later of now and the log's clock, and
//     that clock; nil if it is malformed.
//
// Debts saturate at 2^52 tokens, where every state saturates anyway.
const carryLua = `
local function fields(s, m)
  local out = {}
  local p = m == 3 and '^(%d+):(%d+):(%d+)$' or m == 4 and '^(%d+):(%d+):(%d+):(%d+)$' or '^(%d+):(%d+)$'
  for f in string.gmatch(s .. ',', '([^,]*),') do
    local t = {string.match(f, p)}
    if #t ~= m then return nil end
    for i = 1, m do
      if #t[i] > 16 or (#t[i] == 16 and t[i] > '9007199254740992') then return nil end
      t[i] = tonumber(t[i])
    end
    out[#out + 1] = t
  end
  return out
end

local function view(w, a, idx, p, q)
  local e = math.fmod(now, w)
  local iw = (now - e) / w
  if idx > iw then return {idx - iw, p, q} end
  if idx == iw then return {0, p, q} end
  if idx == iw - 1 then return {0, q, 0} end
  return {0, 0, 0}
end

local function parse(v, base, want, W)
  local desc, st, m = base, v, 2
  local slash = string.find(v, '/', 1, true)
  if slash then desc, st, m = string.sub(v, 1, slash - 1), string.sub(v, slash + 1), 3 end
  local S, O = fields(st, m), W
  if desc ~= want then O = fields(desc, 4) end
  if not S or not O or #S ~= #O or #S > 8 then return nil end
  local old = {}
  for i = 1, #S do
    local k, g, f, a, b, r = O[i][1], O[i][3], O[i][4], S[i][1], S[i][2], S[i][3] or 0
    if k == 0 then
      if m ~= 3 or O[i][2] < 1 or g < 1 or (f ~= 1 and f ~= 2) or math.max(O[i][2], g) > 4503599627370496 or b > g or r > g or a * O[i][2] > 9007199254740992 then return nil end
      old[i] = view(O[i][2], f, a, b, r)
    elseif k < 1 or O[i][2] < 1 or g < 1 or f < 1 or math.max(k, O[i][2], g, f) > 4503599627370496 or b >= k or r >= g then
      return nil
    else
      old[i] = {0, 0, 0, a, b, r}
      if a > now or (a == now and b > 0) then old[i] = {a - now, b, r} end
    end
  end
  return O, old, desc
end

local CAP = 4503599627370496
local function ceildiv(x, y)
  local m = math.fmod(x, y)
  local d = (x - m) / y
  if m > 0 then d = d + 1 end
  return d
end
local function owed(o, s)
  if o[1] == 0 then
    local w, N = o[2], o[3]
    local e = math.fmod(now, w)
    if s[1] > 0 then
      if s[1] - 1 > CAP / N then return CAP end
      return math.min(N * (s[1] - 1) + (o[4] == 1 and N or s[2]) + s[3] + ceildiv(N * (w - e), w), CAP)
    end
    if s[2] == 0 then return s[3] end
    return s[3] + ceildiv(s[2] * (w - e), w)
  end
  if s[1] * o[1] > CAP then return CAP end
  return ceildiv(s[1] * o[1] + s[2], o[2])
end

-- a·b as two base-2^26 digits, for a below 2^53 and b below 2^26
local function mul26(a, b)
  local al = math.fmod(a, 67108864)
  local lo = al * b
  local c = math.fmod(lo, 67108864)
  return (a - al) / 67108864 * b + (lo - c) / 67108864, c
end
local function samelen(x, y)
  local a, b, c, d = x[2], 1, y[2], 1
  if x[1] > 0 then a, b = x[4], x[1] end
  if y[1] > 0 then c, d = y[4], y[1] end
  local h1, l1 = mul26(a, d)
  local h2, l2 = mul26(c, b)
  return h1 == h2 and l1 == l2
end
local function match(O, W, j)
  local same, C = false, {}
  for i = 1, #O do same = same or samelen(O[i], W[j]) end
  for i = 1, #O do
    local has = false
    for k = 1, #W do has = has or samelen(O[i], W[k]) end
    if not same or not has or samelen(O[i], W[j]) then C[#C + 1] = i end
  end
  return C
end

local function spill(d, from, w)
  local k = (from - math.fmod(from, w[2]) - now + math.fmod(now, w[2])) / w[2]
  if d <= w[3] then return {k, 0, d} end
  local full = math.floor((d - 1) / w[3])
  local last = math.floor(9007199254740992 / w[2]) - (now - math.fmod(now, w[2])) / w[2]
  return {math.min(k + full, last), w[3], d - full * w[3]}
end
local function tokens(d, from, w)
  local x = math.min(d * w[2], 4503599627370496)
  local b = math.fmod(x, w[1])
  local du = from - now + (x - b) / w[1]
  if du > 9007199254740992 - now then return {9007199254740992 - now, 0, 0} end
  return {du, b, 0}
end

local function logOwed(v)
  local te, b, rest = string.match(v, '^~%d+:%d+:(%d+):(%d+);(%d*)$')
  if not b or #te > 16 or #b > 10 or #rest % 26 ~= 0 then return nil end
  te, b = tonumber(te), tonumber(b)
  local at, k = math.max(now, te), #rest / 26
  local function field(i, x, y)
    local f = tonumber(string.sub(rest, (i - 1) * 26 + x, (i - 1) * 26 + y))
    if not f then error('keyrate: malformed log') end
    return f
  end
  local ok, u = pcall(function()
    local lo, hi = 1, k + 1
    while lo < hi do
      local m = math.floor((lo + hi) / 2)
      if field(m, 1, 16) > at then hi = m else lo = m + 1 end
    end
    if lo > k then return 0 end
    local before = lo > 1 and field(lo - 1, 17, 26) or b
    return (field(k, 17, 26) - before) % 4294967296
  end)
  if not ok then return nil end
  return math.min(u, 2147483648), math.min(te, 9007199254740992)
end
`
