// The shared token bucket of one tenant, as one atomic Redis Lua script.
// Redis runs a script alone, so concurrent routers never both spend the same
// tokens. The arithmetic is the in-memory bucket's (core/decide/quota.ts),
// step for step, so both give the same verdicts (test/quota/bucket.test.ts).
//
// KEYS[1]  the tenant's hash: r (requests left), t (tokens left), at (ms of the last refill)
// ARGV     op ('take' | 'give' | 'charge'), requests/min, tokens/min (-1: no limit),
//          need requests, need tokens (take: all or nothing; give: amounts returned;
//          charge: amounts taken as far as there are, never below empty: usage settlement),
//          want requests, want tokens (take: up to this much when it fits: the lease),
//          now in ms ('' : Redis's own clock, so routers' clocks never matter),
//          key TTL in ms (a bucket untouched a minute is full: a missing key is full)
// Returns  { fits (1|0), granted requests, granted tokens, requests left, tokens left }
//          numbers as %.17g strings: Redis would truncate Lua numbers to
//          integers, and tostring() keeps only 14 digits.
//
// Anything stored under the key that is not a sane bucket (another type, text,
// NaN, negative, above the limit, a time in the future) is read as a full or
// clamped bucket, never an error: garbage under a key costs at most one
// minute's quota, never an outage.
export const TOKEN_BUCKET_LUA = `
-- Reading TIME before writing needs effects replication (the default from Redis 7 on).
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local op = ARGV[1]
local rpm = tonumber(ARGV[2])
local tpm = tonumber(ARGV[3])
local needR = tonumber(ARGV[4])
local needT = tonumber(ARGV[5])
local wantR = tonumber(ARGV[6])
local wantT = tonumber(ARGV[7])
local now = tonumber(ARGV[8])
local ttl = tonumber(ARGV[9])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local kind = redis.call('TYPE', key)['ok']
if kind ~= 'hash' and kind ~= 'none' then redis.call('DEL', key) end
local raw = redis.call('HMGET', key, 'r', 't', 'at')

local function level(text, limit)
  local v = tonumber(text)
  if v == nil or v ~= v or v > limit then return limit end
  if v < 0 then return 0 end
  return v
end

local at = tonumber(raw[3])
if at == nil or at ~= at or at > now then at = now end
local elapsed = math.max(0, now - at) / 60000
local r = 0
local t = 0
if rpm >= 0 then r = math.min(rpm, level(raw[1], rpm) + elapsed * rpm) end
if tpm >= 0 then t = math.min(tpm, level(raw[2], tpm) + elapsed * tpm) end

local fits = 0
local grantR = 0
local grantT = 0
if op == 'give' then
  if rpm >= 0 then r = math.min(rpm, r + needR) end
  if tpm >= 0 then t = math.min(tpm, t + needT) end
elseif op == 'charge' then
  if rpm >= 0 then r = math.max(0, r - needR) end
  if tpm >= 0 then t = math.max(0, t - needT) end
elseif (rpm < 0 or r >= needR) and (tpm < 0 or t >= needT) then
  fits = 1
  if rpm >= 0 then
    grantR = math.min(r, math.max(needR, wantR))
    r = r - grantR
  end
  if tpm >= 0 then
    grantT = math.min(t, math.max(needT, wantT))
    t = t - grantT
  end
end

local function num(x) return string.format('%.17g', x) end
redis.call('HSET', key, 'r', num(r), 't', num(t), 'at', num(now))
redis.call('PEXPIRE', key, ttl)
return { fits, num(grantR), num(grantT), num(r), num(t) }
`;
