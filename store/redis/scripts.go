package redis

import goredis "github.com/redis/go-redis/v9"

// The server-side scripts. Each is loaded once per connection's server and
// run by EVALSHA; go-redis sends the source again when the server answers
// NOSCRIPT (after a restart). Every key a script touches is under the
// store's prefix, in its hash-tag slot; the ones whose names are fixed come
// in KEYS. Lua's unpack is bounded (a few thousand values), so the scripts
// pass long argument lists to one command in chunks of scriptChunk.

// scriptChunk is how many values one command in a script takes at most. It
// is even, so that field/value pairs are never split.
const scriptChunk = 1000

// updateSource checks what a batch was decided on and writes the batch, all
// or nothing: every check runs before the first write.
//
// KEYS[1] the member's lease, [2] the chain heads, [3] the member's chain,
// [4] source versions, [5] sources, [6] entity versions, [7] entities,
// [8] quarantine entries, [9] quarantine ids, [10] the key index, and from
// [11] the idempotency keys: first the ARGV[5] checked ones, then any
// written without a check.
//
// ARGV[1] the lease holder, [2] the member, [3] the batch's first audit
// position (0 when it has none), [4] the chain head after it, then the
// counts: [5] checked keys, [6] checked sources, [7] checked entities,
// [8] keys written, [9] sources written, [10] entities written, [11] audit
// records, [12] quarantine entries, [13] resolved entries. From ARGV[14],
// in order: the value read of each checked key ("" for absent); (id,
// version) of each checked source and (name, version) of each checked
// entity ("0" for absent); (KEYS index, value, PX milliseconds) of each key
// written; (id, JSON) of each source written; (name, JSON) of each
// entity written; each audit record's JSON; (hex id, JSON) of each
// quarantine entry; the hex id of each resolved entry.
//
// Returns {"ok"}; {"lease", holder} when the lease is not the caller's ("" when
// it is free); {"gap", head position} when the first record does not follow
// the chain head; {"conflict"} when a key or row changed since it was read;
// {"notfound", hex id} for a resolved entry no longer open.
const updateSource = `
local a = ARGV
local step = 1000 -- scriptChunk
local holder = redis.call('GET', KEYS[1])
if holder ~= a[1] then return {'lease', holder or ''} end
local first = tonumber(a[3])
local nk, ns, ne = tonumber(a[5]), tonumber(a[6]), tonumber(a[7])
local wk, ws, we = tonumber(a[8]), tonumber(a[9]), tonumber(a[10])
local na, nq, nr = tonumber(a[11]), tonumber(a[12]), tonumber(a[13])
if na > 0 then
  local head = redis.call('HGET', KEYS[2], a[2])
  local pos = 0
  if head then pos = tonumber(string.match(head, '^%d+')) end
  if pos + 1 ~= first or redis.call('LLEN', KEYS[3]) ~= pos then return {'gap', tostring(pos)} end
end
local p = 14
for i = 0, nk - 1, step do
  local n = math.min(step, nk - i)
  local vals = redis.call('MGET', unpack(KEYS, 11 + i, 10 + i + n))
  for j = 1, n do
    if (vals[j] or '') ~= a[p + i + j - 1] then return {'conflict'} end
  end
end
p = p + nk
local function same(key, n)
  for i = 0, n - 1, step do
    local m = math.min(step, n - i)
    local ids = {}
    for j = 1, m do ids[j] = a[p + 2 * (i + j - 1)] end
    local vs = redis.call('HMGET', key, unpack(ids))
    for j = 1, m do
      if (vs[j] or '0') ~= a[p + 2 * (i + j - 1) + 1] then return false end
    end
  end
  p = p + 2 * n
  return true
end
if not same(KEYS[4], ns) or not same(KEYS[6], ne) then return {'conflict'} end
local r0 = p + 3 * wk + 2 * ws + 2 * we + na + 2 * nq
for i = r0, r0 + nr - 1 do
  if redis.call('HEXISTS', KEYS[8], a[i]) == 0 then return {'notfound', a[i]} end
end
local z = {}
for i = 0, wk - 1 do
  local q = p + 3 * i
  local at = tonumber(a[q])
  local k, v = KEYS[at], a[q + 1]
  local old
  if at <= 10 + nk then old = a[14 + at - 11] else old = redis.call('GET', k) end
  if old and old ~= '' then redis.call('ZREM', KEYS[10], string.sub(old, 41, 48) .. string.sub(k, -32)) end
  redis.call('SET', k, v, 'PX', a[q + 2])
  z[#z + 1] = 0
  z[#z + 1] = string.sub(v, 41, 48) .. string.sub(k, -32)
end
for i = 1, #z, step do redis.call('ZADD', KEYS[10], unpack(z, i, math.min(i + step - 1, #z))) end
p = p + 3 * wk
local function rows(vkey, dkey, n)
  for i = 0, n - 1 do redis.call('HINCRBY', vkey, a[p + 2 * i], 1) end
  for i = 0, 2 * n - 1, step do
    redis.call('HSET', dkey, unpack(a, p + i, p + math.min(i + step, 2 * n) - 1))
  end
  p = p + 2 * n
end
rows(KEYS[4], KEYS[5], ws)
rows(KEYS[6], KEYS[7], we)
for i = 0, na - 1, step do
  redis.call('RPUSH', KEYS[3], unpack(a, p + i, p + math.min(i + step, na) - 1))
end
if na > 0 then redis.call('HSET', KEYS[2], a[2], a[4]) end
p = p + na
for i = 0, nq - 1 do
  redis.call('HSET', KEYS[8], a[p + 2 * i], a[p + 2 * i + 1])
  redis.call('ZADD', KEYS[9], 0, a[p + 2 * i])
end
p = p + 2 * nq
for i = p, p + nr - 1 do
  redis.call('HDEL', KEYS[8], a[i])
  redis.call('ZREM', KEYS[9], a[i])
end
return {'ok'}
`

var updateScript = goredis.NewScript(updateSource)

// acquireScript takes a member's lease when it is free, already the
// caller's, or held by ARGV[4] (a holder found dead), and gives the member
// its number the first time it is ever seen.
//
// KEYS[1] the lease, [2] the member numbers, [3] the last number given.
// ARGV[1] the holder, [2] the lease's PX milliseconds, [3] the member,
// [4] the holder it may replace ("" for none).
//
// Returns {1, member number}, or {0, holder, PTTL milliseconds} when another
// holder has it.
var acquireScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] and cur ~= ARGV[4] then
  return {0, cur, redis.call('PTTL', KEYS[1])}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local n = redis.call('HGET', KEYS[2], ARGV[3])
if not n then
  n = redis.call('INCR', KEYS[3])
  redis.call('HSET', KEYS[2], ARGV[3], n)
end
return {1, tonumber(n)}
`)

// renewScript extends the caller's lease, taking it again when it expired
// meanwhile (the store was unreachable for longer than the lease) and nobody
// took it.
//
// KEYS[1] the lease. ARGV[1] the holder, [2] the lease's PX milliseconds.
//
// Returns "" when the caller holds the lease now, else the holder.
var renewScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return cur end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ''
`)

// releaseScript deletes a lease or task lock when the caller holds it.
//
// KEYS[1] the lease or lock. ARGV[1] the holder. Returns 1 when deleted.
var releaseScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// lockScript takes or extends the pruning task's lock.
//
// KEYS[1] the lock. ARGV[1] the holder, [2] PX milliseconds. Returns 1 when
// the caller holds the lock now.
var lockScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`)

// pruneScript removes, from the oldest end of the key index, up to ARGV[3]
// entries whose key has expired, then up to ARGV[3] of the oldest entries
// beyond ARGV[2] together with their keys.
//
// KEYS[1] the key index: members are the ordinal (8 bytes, big endian) and
// the key's 32 bytes, all scored 0, so that their order is the ordinals'.
// ARGV[1] the key names' prefix (the 32 bytes follow it), [2] the most keys
// kept, [3] the chunk.
//
// Returns {expired entries removed, keys trimmed}.
var pruneScript = goredis.NewScript(`
local chunk = tonumber(ARGV[3])
local gone = {}
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, chunk - 1)) do
  if redis.call('EXISTS', ARGV[1] .. string.sub(m, 9)) == 1 then break end
  gone[#gone + 1] = m
end
if #gone > 0 then redis.call('ZREM', KEYS[1], unpack(gone)) end
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2])
local trimmed = 0
if over > 0 then
  local old = redis.call('ZRANGE', KEYS[1], 0, math.min(over, chunk) - 1)
  for _, m in ipairs(old) do redis.call('DEL', ARGV[1] .. string.sub(m, 9)) end
  redis.call('ZREM', KEYS[1], unpack(old))
  trimmed = #old
end
return {#gone, trimmed}
`)
