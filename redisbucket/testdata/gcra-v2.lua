-- The script of redisbucket with policies, before a value recorded the
-- limits of the default policy (gcraSource as of commit f94bd9d): it
-- wrote a one-window value of its base descriptor as "a:b", read "a:b"
-- as under its own base, and read "desc/a:b:r" under any descriptor.
-- TestOldProcessReadsNewValue runs it as the previous version of the
-- store. ARGV: now in µs ("-1": TIME), cost, least TTL in ms, then either
-- K, I, G, F (the short form: the policy is its base) or the policy's
-- descriptor, the base descriptor, the mode, and K, I, G, F a window.
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
local short = #ARGV == 7
if (short or (ARGV[4] == ARGV[5] and ARGV[6] == '')) and cost >= 0 and type(v) ~= 'table' then
  local o = short and 3 or 6
  local K, I, F = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 4])
  local a, b = 0, 0
  if v then
    a, b = string.match(v, '^(%d+):(%d+)$')
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
    redis.call('SET', KEYS[1], string.format('%d:%d', now + du, db), 'PX', string.format('%d', ttl))
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
  local d = table.concat(ARGV, ':', 4, 7)
  A = {ARGV[1], ARGV[2], ARGV[3], d, d, '', ARGV[4], ARGV[5], ARGV[6], ARGV[7]}
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

local function view(w, a, idx, p, q)
  local e = math.fmod(now, w)
  local iw = (now - e) / w
  if idx > iw then return {idx - iw, p, q} end
  if idx == iw then return {0, p, q} end
  if idx == iw - 1 then return {0, q, 0} end
  return {0, 0, 0}
end

local function fits(w, d, c)
  local N, p, q = w[3], d[2], d[3] + c
  if d[1] > 0 or q > N then return false end
  if w[4] == 1 or p == 0 then return true end
  return p * (w[2] - math.fmod(now, w[2])) <= (N - q) * w[2]
end

local function wcarry(o, s, w)
  local from, d = now, 0
  if o[1] == 0 and s[1] > 0 then
    from, d = (now - math.fmod(now, o[2]) + s[1] * o[2]), (o[4] == 1 and o[3] or s[2]) + s[3]
  elseif o[1] == 0 then
    local y = s[2] * (o[2] - math.fmod(now, o[2]))
    local m = math.fmod(y, o[2])
    d = s[3] + (y - m) / o[2]
    if m > 0 then d = d + 1 end
  elseif s[1] * o[1] > 4503599627370496 then
    d = 4503599627370496
  else
    local t = s[1] * o[1] + s[2]
    d = (t - math.fmod(t, o[2])) / o[2]
    if math.fmod(t, o[2]) > 0 then d = d + 1 end
  end
  if w[1] > 0 then
    local x = math.min(d * w[2], 4503599627370496)
    local b = math.fmod(x, w[1])
    local du = from - now + (x - b) / w[1]
    if du > 9007199254740992 - now then return {9007199254740992 - now, 0, 0} end
    return {du, b, 0}
  end
  local k = (from - math.fmod(from, w[2]) - now + math.fmod(now, w[2])) / w[2]
  if d <= w[3] then return {k, 0, d} end
  local full = math.floor((d - 1) / w[3])
  local last = math.floor(9007199254740992 / w[2]) - (now - math.fmod(now, w[2])) / w[2]
  return {math.min(k + full, last), w[3], d - full * w[3]}
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

if type(v) == 'table' then
  if string.sub(v.err or '', 1, 9) ~= 'WRONGTYPE' then
    return redis.error_reply(v.err or 'keyrate: GET failed')
  end
  bad = 1
elseif v and string.byte(v, 1) == 126 then
  local N, b, rest = string.match(v, '^~%d+:(%d+):%d+:(%d+);(%d*)$')
  if not b or #N > 6 or #b > 10 or #rest % 26 ~= 0 then
    bad = 1
  else
    moved = true
    local k = #rest - 25
    local x, c = tonumber(string.sub(rest, k, k + 15)), tonumber(string.sub(rest, k + 16))
    if #rest > 0 and x > now then
      local o, s = {1, 1, 1, 1}, {(c - tonumber(b)) % 4294967296, 0, 0}
      D[1] = W[1][1] > 0 and carry(o, s, W[1]) or wcarry(o, s, W[1])
    end
  end
elseif v then
  local desc, st, m = base, v, 2
  local slash = string.find(v, '/', 1, true)
  if slash then desc, st, m = string.sub(v, 1, slash - 1), string.sub(v, slash + 1), 3 end
  local S, O = fields(st, m), W
  if desc ~= want then O, moved = fields(desc, 4), true end
  if not S or not O or #S ~= #O or #S > 8 then bad = 1 end
  local old = {}
  for i = 1, (bad == 0 and #S or 0) do
    local k, g, f, a, b, r = O[i][1], O[i][3], O[i][4], S[i][1], S[i][2], S[i][3] or 0
    if k == 0 then
      if m ~= 3 or O[i][2] < 1 or g < 1 or (f ~= 1 and f ~= 2) or math.max(O[i][2], g) > 4503599627370496 or b > g or r > g or a * O[i][2] > 9007199254740992 then
        bad = 1
        break
      end
      old[i] = view(O[i][2], f, a, b, r)
    elseif k < 1 or O[i][2] < 1 or g < 1 or f < 1 or math.max(k, O[i][2], g, f) > 4503599627370496 or b >= k or r >= g then
      bad = 1
      break
    end
    if k > 0 then
      old[i] = {0, 0, 0, a, b, r}
      if a > now or (a == now and b > 0) then old[i] = {a - now, b, r} end
    end
  end
  for i = 1, (bad == 0 and n or 0) do
    local o, s, w = O[i], old[i], W[i]
    if not s or not moved then
      D[i] = s or D[i]
    elseif w[1] == 0 and o[1] == 0 and w[2] == o[2] and w[4] == o[4] and s[2] <= w[3] and s[3] <= w[3] then
      D[i] = {s[1], s[2], s[3]}
    elseif w[1] > 0 and o[1] > 0 then
      D[i] = carry(o, s, w)
    else
      D[i] = wcarry(o, s, w)
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
  local value = want .. '/' .. table.concat(T, ',')
  if n == 1 and want == base and string.sub(T[1], -2) == ':0' then value = string.sub(T[1], 1, -3) end
  redis.call('SET', KEYS[1], value, 'PX', string.format('%d', ttl))
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
