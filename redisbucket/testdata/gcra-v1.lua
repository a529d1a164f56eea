-- The script of redisbucket before policies (as of commit 63c523d), which
-- kept one window as "a:b". TestRollingDeploy runs it as the previous
-- version of the store. ARGV: now in µs, cost (0: peek), K, I, F, least TTL.
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
