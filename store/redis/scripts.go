package redis

import goredis "github.com/redis/go-redis/v9"

// The server-side scripts. Each is loaded once per connection's server and
// run by EVALSHA; go-redis sends the source again when the server answers
// NOSCRIPT (after a restart). Every key a script touches is under the
// store's prefix, in its hash-tag slot, and named in KEYS but for the keys
// the pruning script finds in the index. Lua's unpack is bounded (a few
// thousand values), so the update script passes long argument lists to one
// command in chunks of 1000 (even: field/value pairs are never split).

// updateSource checks what a batch was decided on and writes the batch, all
// or nothing: every check runs before the first write. Its work per key is
// one slot of an EXISTS (when none of its chunk of a thousand keys was
// read present, as in a batch without duplicates: it answers a count, not
// a value per key) or of an MGET, and one SET; the batch's keys are
// indexed together, and its audit records are stored together, one field
// each. A row it checked gets its version read plus one, in one HSET with
// the others; a row written without a check (Commit) an HINCRBY.
//
// KEYS[1] the member's lease, [2] the chain heads, [3] the member's chain,
// [4] its chain index, [5] source versions, [6] sources, [7] entity
// versions, [8] entities, [9] quarantine entries, [10] quarantine ids,
// [11] the key index, [12] the key count, [13] this batch's key set, [14]
// the index of open entries by key and content, [15] its members by entry,
// and from [16] the idempotency keys: first the ARGV[5] checked ones, then
// any written without a check.
//
// ARGV[1] the lease holder, [2] the member, [3] the batch's first audit
// position (0 when it has none), [4] the chain head after it, then the
// counts: [5] checked keys, [6] checked sources, [7] checked entities,
// [8] keys written, [9] sources written, [10] entities written, [11] audit
// records, [12] quarantine entries, [13] resolved entries; [14] the keys'
// PX milliseconds, [15] the batch's member of the key index, [16] its key
// set, [17] its audit records, one JSON per line; [18] one byte per checked
// key, "1" when it was read present, "0" when absent; [19] one byte per
// idempotency key in KEYS, "1" when the batch writes it; [20] how many
// checked keys were read present; [21] the row locks' token, [22] how
// many row locks there are: the last KEYS, each of which must still hold
// the token (Commit has none); [23] the channel told when they are deleted.
// From ARGV[24], in order: the value read of
// each key read present; (id, version) of each checked source and (name,
// version) of each checked entity ("0" for absent); the value of each key
// written, in KEYS order; (id, JSON) of each source written; (name, JSON) of
// each entity written; (hex id, JSON) of each quarantine entry; the hex id
// of each resolved entry; then the outbox's, when the batch has entries or
// holds (see outboxWrites), whose KEYS come before the row locks. The
// last ARGV are the held index's (heldArgs), read from the end: the member
// of quarantine:held of each quarantine entry ("" for one not indexed), the
// hex ids of the open entries the batch's duplicates name (HeldOpen), how
// many of those there are, and "1" for an Update, "0" for Commit; one
// named that is no longer open is a {"conflict"}, as is, in an Update, a
// quarantine entry of a key and content another open entry holds (one
// the batch does not resolve): another member held the message since the
// batch was decided, and the batch, decided again, finds that entry
// (heldFirst).
//
// Returns {"ok"}; {"lease", holder} when the lease is not the caller's ("" when
// it is free); {"gap", head position} when the first record does not follow
// the chain head; {"conflict"} when a key or row changed since it was read;
// {"notfound", hex id} for a resolved entry no longer open; {"notheld",
// index} for a resolved outbox entry that is not held, {"notpending",
// index} for an operator's hold of an entry no longer pending
// (outboxChecks). A
// {"conflict"} keeps the caller's row locks (it reads again under them);
// {"ok"} deletes them.
const updateSource = `
redis.replicate_commands()
local a = ARGV
local step = 1000
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
  if pos + 1 ~= first then return {'gap', tostring(pos)} end
end
local nl = tonumber(a[22])
for i = 0, nl - 1, step do
  local n = math.min(step, nl - i)
  local vals = redis.call('MGET', unpack(KEYS, #KEYS - nl + 1 + i, #KEYS - nl + i + n))
  for j = 1, n do
    if vals[j] ~= a[21] then return {'conflict'} end
  end
end
local p = 24
local present = p
for i = 0, nk - 1, step do
  local n = math.min(step, nk - i)
  if not string.find(string.sub(a[18], i + 1, i + n), '1', 1, true) then
    if redis.call('EXISTS', unpack(KEYS, 16 + i, 15 + i + n)) ~= 0 then return {'conflict'} end
  else
    local vals = redis.call('MGET', unpack(KEYS, 16 + i, 15 + i + n))
    for j = 1, n do
      if string.byte(a[18], i + j) == 48 then
        if vals[j] then return {'conflict'} end
      else
        if vals[j] ~= a[present] then return {'conflict'} end
        present = present + 1
      end
    end
  end
end
p = p + tonumber(a[20])
local function same(key, n)
  local read = {}
  for i = 0, n - 1, step do
    local m = math.min(step, n - i)
    local ids = {}
    for j = 1, m do ids[j] = a[p + 2 * (i + j - 1)] end
    local vs = redis.call('HMGET', key, unpack(ids))
    for j = 1, m do
      local v = a[p + 2 * (i + j - 1) + 1]
      if (vs[j] or '0') ~= v then return nil end
      read[ids[j]] = v
    end
  end
  p = p + 2 * n
  return read
end
local srcRead = same(KEYS[5], ns)
local entRead = srcRead and same(KEYS[7], ne)
if not entRead then return {'conflict'} end
local r0 = p + wk + 2 * ws + 2 * we + 2 * nq
for i = r0, r0 + nr - 1 do
  if redis.call('HEXISTS', KEYS[9], a[i]) == 0 then return {'notfound', a[i]} end
end
local hn = tonumber(a[#a - 1])
local hm = #a - 1 - hn - nq
for i = #a - 1 - hn, #a - 2 do
  if redis.call('HEXISTS', KEYS[9], a[i]) == 0 then return {'conflict'} end
end
if a[#a] == '1' and nq > 0 then
` + heldFirst + `
end
` + outboxChecks + `
local w = p
for i = 1, #a[19] do
  if string.byte(a[19], i) == 49 then
    redis.call('SET', KEYS[15 + i], a[w], 'PX', a[14])
    w = w + 1
  end
end
if wk > 0 then
  redis.call('SET', KEYS[13], a[16], 'PX', a[14])
  redis.call('ZADD', KEYS[11], 0, a[15])
  redis.call('INCRBY', KEYS[12], wk)
end
p = p + wk
local function hsetAll(key, list)
  for i = 1, #list, step do
    redis.call('HSET', key, unpack(list, i, math.min(i + step - 1, #list)))
  end
end
local function rows(vkey, dkey, n, read)
  local vs = {}
  for i = 0, n - 1 do
    local id = a[p + 2 * i]
    if read[id] then
      vs[#vs + 1] = id
      vs[#vs + 1] = string.format('%d', tonumber(read[id]) + 1)
    else
      redis.call('HINCRBY', vkey, id, 1)
    end
  end
  hsetAll(vkey, vs)
  for i = 0, 2 * n - 1, step do
    redis.call('HSET', dkey, unpack(a, p + i, p + math.min(i + step, 2 * n) - 1))
  end
  p = p + 2 * n
end
rows(KEYS[5], KEYS[6], ws, srcRead)
rows(KEYS[7], KEYS[8], we, entRead)
if na > 0 then
  redis.call('HSET', KEYS[3], a[3], a[17])
  redis.call('ZADD', KEYS[4], a[3], a[3])
  redis.call('HSET', KEYS[2], a[2], a[4])
end
for i = 0, nq - 1 do
  redis.call('HSET', KEYS[9], a[p + 2 * i], a[p + 2 * i + 1])
  redis.call('ZADD', KEYS[10], 0, a[p + 2 * i])
  if a[hm + i] ~= '' then
    redis.call('ZADD', KEYS[14], 0, a[hm + i])
    redis.call('HSET', KEYS[15], a[p + 2 * i], a[hm + i])
  end
end
p = p + 2 * nq
for i = p, p + nr - 1 do
  redis.call('HDEL', KEYS[9], a[i])
  redis.call('ZREM', KEYS[10], a[i])
  local m = redis.call('HGET', KEYS[15], a[i])
  if m then
    redis.call('ZREM', KEYS[14], m)
    redis.call('HDEL', KEYS[15], a[i])
  end
end
` + outboxWrites + `
if nl > 0 then
  redis.set_repl(redis.REPL_NONE)
  for i = 0, nl - 1, step do
    redis.call('DEL', unpack(KEYS, #KEYS - nl + 1 + i, #KEYS - nl + math.min(i + step, nl)))
  end
  redis.call('PUBLISH', a[23], '')
  redis.set_repl(redis.REPL_ALL)
end
return {'ok'}
`

// heldFirst is the part of the update script that checks, in an Update,
// that no open entry holds the message of a quarantine entry the batch
// writes: the members of quarantine:held (KEYS[14]) of its key and
// content whose entries are open (KEYS[9]) and not resolved by the batch
// (a[r0] on). Members an entry left behind (resolved by a build from
// before the index) are passed over, as FindHeld passes them over.
const heldFirst = `
  local gone = {}
  for i = r0, r0 + nr - 1 do gone[a[i]] = true end
  for i = 0, nq - 1 do
    local m = a[hm + i]
    if m ~= '' then
      local pre = string.sub(m, 1, 129)
      local ms = redis.call('ZRANGEBYLEX', KEYS[14], '[' .. pre, '(' .. string.sub(pre, 1, 128) .. ';')
      for _, o in ipairs(ms) do
        local id = string.sub(o, 130)
        if not gone[id] and redis.call('HEXISTS', KEYS[9], id) == 1 then return {'conflict'} end
      end
    end
  end`

var updateScript = goredis.NewScript(updateSource)

// readSource takes the row locks of a batch and reads its rows. The locks
// keep other members from changing the rows between this read and the
// write: the update script's checks are what guarantee that; the locks only
// spare the members races they would lose. It takes every lock or none:
// when another token holds one, it deletes those the caller holds (so that
// nobody waits while holding some) and reads nothing. The locks are written
// to neither the AOF nor a replica (REPL_NONE): a restart or failover forgets
// them, which costs at most a lost race, and taking them adds no fsync.
//
// KEYS[1] source versions, [2] sources, [3] entity versions, [4] entities,
// then the ARGV[3] row locks (the sources', then the entities', each in
// order), then the ARGV[4] idempotency keys. ARGV[1] the token, [2] the
// locks' PX milliseconds, [3] how many locks, [4] how many keys, [5] how
// many sources, [6] how many entities, from [7] the source ids, then the
// entity names.
//
// Returns {"held", i} when another token holds a lock, i the first such
// among the locks (from 1), else {"ok", the keys' values, the sources'
// versions, the sources, the entities' versions, the entities}, each in the
// order asked, an absent one false.
const readSource = `
redis.replicate_commands()
local a = ARGV
local step = 1000
local nl, nk, ns, ne = tonumber(a[3]), tonumber(a[4]), tonumber(a[5]), tonumber(a[6])
local function many(cmd, key, list, from, n)
  local out = {}
  for i = 0, n - 1, step do
    local m = math.min(step, n - i)
    local vals
    if key then
      vals = redis.call(cmd, key, unpack(list, from + i, from + i + m - 1))
    else
      vals = redis.call(cmd, unpack(list, from + i, from + i + m - 1))
    end
    for j = 1, m do out[i + j] = vals[j] end
  end
  return out
end
if nl > 0 then
  local held = many('MGET', nil, KEYS, 5, nl)
  local busy = nil
  for i = 1, nl do
    if held[i] and held[i] ~= a[1] then
      busy = i
      break
    end
  end
  redis.set_repl(redis.REPL_NONE)
  if busy then
    for i = 1, nl do
      if held[i] == a[1] then redis.call('DEL', KEYS[4 + i]) end
    end
    return {'held', tostring(busy)}
  end
  for i = 1, nl do redis.call('SET', KEYS[4 + i], a[1], 'PX', a[2]) end
  redis.set_repl(redis.REPL_ALL)
end
local res = {'ok', {}, {}, {}, {}, {}}
if nk > 0 then res[2] = many('MGET', nil, KEYS, 5 + nl, nk) end
if ns > 0 then
  res[3] = many('HMGET', KEYS[1], a, 7, ns)
  res[4] = many('HMGET', KEYS[2], a, 7, ns)
end
if ne > 0 then
  res[5] = many('HMGET', KEYS[3], a, 7 + ns, ne)
  res[6] = many('HMGET', KEYS[4], a, 7 + ns, ne)
end
return res
`

var readScript = goredis.NewScript(readSource)

// unlockScript deletes the row locks the caller holds, for an Update that
// failed or wrote nothing. KEYS the locks. ARGV[1] the token, [2] the
// channel told when they are deleted.
var unlockScript = goredis.NewScript(`
redis.replicate_commands()
redis.set_repl(redis.REPL_NONE)
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then redis.call('DEL', KEYS[i]) end
end
redis.call('PUBLISH', ARGV[2], '')
return 0
`)

// acquireScript takes a member's lease when it is free, already the
// caller's, or held by ARGV[4] (a holder found dead), and gives the member
// its number the first time it is ever seen.
//
// A lease taken holds no share group until its member joins one, and no
// share marked lost.
//
// KEYS[1] the lease, [2] the member numbers, [3] the last number given,
// [4] the members' share groups, [5] the member's paths' shares, [6] the
// members' shares lost, [7] the member's paths' shares lost.
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
redis.call('HDEL', KEYS[4], ARGV[3])
redis.call('DEL', KEYS[5])
redis.call('HDEL', KEYS[6], ARGV[3])
redis.call('DEL', KEYS[7])
local n = redis.call('HGET', KEYS[2], ARGV[3])
if not n then
  n = redis.call('INCR', KEYS[3])
  redis.call('HSET', KEYS[2], ARGV[3], n)
end
return {1, tonumber(n)}
`)

// renewScript extends the caller's lease, taking it again when it expired
// meanwhile (the store was unreachable for longer than the lease) and nobody
// took it, and records the member's share group, and the session holding
// it, again when the members' share groups lack it (a server without
// persistence, restarted).
//
// The shares of the member's paths it holds are recorded again in the
// same way, each one its hash lacks.
//
// KEYS[1] the lease, [2] the members' share groups, [3] their sessions,
// [4] the member's paths' shares.
// ARGV[1] the holder, [2] the lease's PX milliseconds, [3] the member, [4]
// the share group it holds ("" none), [5] the session holding it, then
// from [6] each path the member holds a share on and its record, by
// turns.
//
// Returns {"", 1 when the share group was recorded again, else 0, the
// number of paths' shares recorded again} when the caller holds the
// lease now, else {the holder, 0, 0}.
var renewScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return {cur, 0, 0} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local again, paths = 0, 0
if ARGV[4] ~= '' and redis.call('HGET', KEYS[2], ARGV[3]) ~= ARGV[4] then
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[5])
  again = 1
end
for i = 6, #ARGV - 1, 2 do
  if redis.call('HEXISTS', KEYS[4], ARGV[i]) == 0 then
    redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
    paths = paths + 1
  end
end
return {'', again, paths}
`)

// nowMillis is the Lua that sets now to the server's clock in
// milliseconds.
const nowMillis = `local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
`

// quitShareScript marks a member's share lost, at the server's time, when
// it holds the group named there and is not marked lost already: the share
// stays recorded, for a live member to adopt its session once it stays
// lost.
//
// KEYS[1] the members' share groups, [2] their shares lost. ARGV[1] the
// member, [2] the group.
//
// Returns 1 when marked, else 0.
var quitShareScript = goredis.NewScript(nowMillis + `
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HSETNX', KEYS[2], ARGV[1], now) end
return 0
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

// pruneScript removes the oldest key sets from the key index: those that
// expired (with their keys), and while more than ARGV[3] keys would remain,
// the oldest with their keys, each key only if it still holds the ordinal
// the set recorded (a key replaced after it expired belongs to a newer set).
//
// KEYS[1] the key index, whose members are a set's first ordinal (8 bytes,
// big endian), its id and its size ("<ordinal><id>:<size>"), all scored 0,
// so in ordinal order; [2] the key count. ARGV[1] the key names' prefix,
// [2] the key sets' prefix (the id follows it), [3] the most keys kept,
// [4] the most sets removed.
//
// Returns {keys expired, keys trimmed}.
var pruneScript = goredis.NewScript(`
local expired, trimmed = 0, 0
local count = tonumber(redis.call('GET', KEYS[2]) or '0')
for i = 1, tonumber(ARGV[4]) do
  local m = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  if not m then break end
  local id, n = string.match(string.sub(m, 9), '^(.*):(%d+)$')
  n = tonumber(n)
  local set = redis.call('GET', ARGV[2] .. id)
  if not set then
    expired = expired + n
  elseif count - n >= tonumber(ARGV[3]) then
    for j = 1, #set, 40 do
      local k = ARGV[1] .. string.sub(set, j, j + 31)
      local v = redis.call('GET', k)
      if v and string.sub(v, 41, 48) == string.sub(set, j + 32, j + 39) then redis.call('DEL', k) end
    end
    redis.call('DEL', ARGV[2] .. id)
    trimmed = trimmed + n
  else
    break
  end
  redis.call('ZREM', KEYS[1], m)
  redis.call('DECRBY', KEYS[2], n)
  count = count - n
end
return {expired, trimmed}
`)

// leaveShareScript grants a member leave from its share group when another
// member of the group holds a live lease, and removes the member from the
// group; in one script, so that of two members leaving at once the second
// sees the first gone. A member that joined after the caller listed the
// lease keys is not counted: the grant can only be refused for it.
//
// A share marked lost counts for no member.
//
// KEYS[1] the members' share groups, [2] their shares lost, then from [3]
// the lease of each member the caller found in them. ARGV[1] the member,
// [2] its share group, then from [3] the member of each lease, in KEYS
// order.
//
// Returns 1 when granted, else 0.
var leaveShareScript = goredis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] or redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
for i = 3, #KEYS do
  local m = ARGV[i]
  if m ~= ARGV[1] and redis.call('HGET', KEYS[1], m) == ARGV[2] and redis.call('HEXISTS', KEYS[2], m) == 0 and redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('HDEL', KEYS[1], ARGV[1])
    return 1
  end
end
return 0
`)

// joinShareScript records a member's share group and the session that
// holds it, not lost.
//
// KEYS[1] the members' share groups, [2] their sessions, [3] their shares
// lost. ARGV[1] the member, [2] the group, [3] the session: its lease
// holder, a newline, its client id.
var joinShareScript = goredis.NewScript(`
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
`)

// adoptClaimScript takes or renews a handle's claims of the sessions of
// the gone members that hold a share group's subscription.
//
// KEYS[1] the members' share groups, [2] their sessions, [3] their shares
// lost, then for each member (in ARGV order) its lease and its share
// claim. ARGV[1] the holder, [2] the claims' PX milliseconds, [3] this
// handle's member, [4] the share group, [5] the holders of leases and
// share claims found to be processes on this host that have died, one a
// line, [6] how long in milliseconds a share marked lost stays so before
// it is handed over (0: never for its loss alone); from [7] the members.
//
// While this handle's member's lease is not another holder's, a member
// other than this handle's is a candidate when it holds the group in the
// share groups, its session is recorded, and its lease is gone (or held
// by one of ARGV[5]) or its share was marked lost at least ARGV[6]
// milliseconds ago; its claim is taken when free, this holder's or one of
// ARGV[5]'s. Returns the members claimed, their sessions and when their
// shares were marked lost ("" not lost), in ARGV order: {member, session,
// lost, member, session, lost, …}.
var adoptClaimScript = goredis.NewScript(nowMillis + `
local dead = {}
for h in string.gmatch(ARGV[5], '[^\n]+') do dead[h] = true end
local wait = tonumber(ARGV[6])
for i = 7, #ARGV do
  if ARGV[i] == ARGV[3] then
    local lease = redis.call('GET', KEYS[2 * (i - 7) + 4])
    if lease and lease ~= ARGV[1] then return {} end
  end
end
local out = {}
for i = 7, #ARGV do
  local j = 2 * (i - 7) + 4
  local m = ARGV[i]
  if m ~= ARGV[3] and redis.call('HGET', KEYS[1], m) == ARGV[4] then
    local session = redis.call('HGET', KEYS[2], m)
    local lease = redis.call('GET', KEYS[j])
    local lost = redis.call('HGET', KEYS[3], m)
    local lostLong = lost and wait > 0 and now - tonumber(lost) >= wait
    if session and (not lease or dead[lease] or lostLong) then
      local cur = redis.call('GET', KEYS[j + 1])
      if not cur or cur == ARGV[1] or dead[cur] then
        redis.call('SET', KEYS[j + 1], ARGV[1], 'PX', ARGV[2])
        out[#out + 1] = m
        out[#out + 1] = session
        out[#out + 1] = lost or ''
      end
    end
  end
end
return out
`)

// shareAdoptedScript removes a member from the members' share groups once
// its session was adopted: while the caller holds its share claim and the
// member's share is still the group and the session adopted.
//
// KEYS[1] the members' share groups, [2] their sessions, [3] the member's
// share claim, [4] the members' shares lost. ARGV[1] the holder, [2] the
// member, [3] the group, [4] the session, [5] when the share adopted was
// marked lost ("" not lost): a member that joined again, or was lost
// again since, is not removed.
//
// Returns 1 when removed, else 0.
var shareAdoptedScript = goredis.NewScript(`
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], ARGV[2]) ~= ARGV[3] or redis.call('HGET', KEYS[2], ARGV[2]) ~= ARGV[4] then return 0 end
if (redis.call('HGET', KEYS[4], ARGV[2]) or '') ~= ARGV[5] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[2])
return 1
`)

// pathClaimScript takes or renews a handle's claims of the sessions on
// one path of the gone members that hold a share group's subscription
// there: adoptClaimScript, path by path.
//
// For each member (in ARGV order) KEYS holds its lease, its paths' shares,
// its claim on the path and its paths' shares lost. ARGV[1] the holder,
// [2] the claims' PX milliseconds, [3] this handle's member, [4] the
// share group, [5] the holders of leases and path claims found to be
// processes on this host that have died, one a line, [6] the path, [7]
// how long in milliseconds a share marked lost stays so before it is
// handed over (0: never for its loss alone); from [8] the members.
//
// Returns the members claimed, their records on the path and when their
// shares there were marked lost ("" not lost), in ARGV order: {member,
// record, lost, …}.
var pathClaimScript = goredis.NewScript(nowMillis + `
local dead = {}
for h in string.gmatch(ARGV[5], '[^\n]+') do dead[h] = true end
local wait = tonumber(ARGV[7])
for i = 8, #ARGV do
  if ARGV[i] == ARGV[3] then
    local lease = redis.call('GET', KEYS[4 * (i - 8) + 1])
    if lease and lease ~= ARGV[1] then return {} end
  end
end
local group = ARGV[4] .. '\n'
local out = {}
for i = 8, #ARGV do
  local j = 4 * (i - 8) + 1
  local m = ARGV[i]
  if m ~= ARGV[3] then
    local rec = redis.call('HGET', KEYS[j + 1], ARGV[6])
    local lease = redis.call('GET', KEYS[j])
    local lost = redis.call('HGET', KEYS[j + 3], ARGV[6])
    local lostLong = lost and wait > 0 and now - tonumber(lost) >= wait
    if rec and string.sub(rec, 1, #group) == group and (not lease or dead[lease] or lostLong) then
      local cur = redis.call('GET', KEYS[j + 2])
      if not cur or cur == ARGV[1] or dead[cur] then
        redis.call('SET', KEYS[j + 2], ARGV[1], 'PX', ARGV[2])
        out[#out + 1] = m
        out[#out + 1] = rec
        out[#out + 1] = lost or ''
      end
    end
  end
end
return out
`)

// pathAdoptedScript removes a member's share of a path once its session
// there was adopted: while the caller holds its claim on the path and the
// member's share there is still the one adopted (its group, holder and
// client id, the record's first three lines).
//
// KEYS[1] the member's paths' shares, [2] its claim on the path, [3] its
// paths' shares lost. ARGV[1] the holder, [2] the path, [3] the first
// three lines of the record adopted, each ended by a newline, [4] when
// the share adopted was marked lost ("" not lost).
//
// Returns 1 when removed, else 0.
var pathAdoptedScript = goredis.NewScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
local rec = redis.call('HGET', KEYS[1], ARGV[2])
if not rec or string.sub(rec, 1, #ARGV[3]) ~= ARGV[3] then return 0 end
if (redis.call('HGET', KEYS[3], ARGV[2]) or '') ~= ARGV[4] then return 0 end
redis.call('HDEL', KEYS[3], ARGV[2])
return redis.call('HDEL', KEYS[1], ARGV[2])
`)

// joinPathScript records a member's share on a path, not lost.
//
// KEYS[1] the member's paths' shares, [2] its paths' shares lost. ARGV[1]
// the path, [2] the record.
var joinPathScript = goredis.NewScript(`
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
`)

// quitPathScript marks a member's share of a path lost, at the server's
// time, when it is the group's and not marked lost already.
//
// KEYS[1] the member's paths' shares, [2] its paths' shares lost. ARGV[1]
// the path, [2] the group.
//
// Returns 1 when marked, else 0.
var quitPathScript = goredis.NewScript(nowMillis + `
local rec = redis.call('HGET', KEYS[1], ARGV[1])
local group = ARGV[2] .. '\n'
if rec and string.sub(rec, 1, #group) == group then return redis.call('HSETNX', KEYS[2], ARGV[1], now) end
return 0
`)
