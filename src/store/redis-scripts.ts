/**
 * Lua scripts of the Redis session store. Each write is one script so the fence check and the write
 * are atomic (two replicas can never interleave between them).
 *
 * Per session: KEYS[1] the record hash, KEYS[2] the journal sorted set (score = status_seq).
 * Hash fields: r = static record (msgpack), a = agent_ack, s = suspended_at_ms ('' while attached),
 * f = fence, t = TTL in ms applied to both keys while the session is suspended, o = an observer
 * session's subscriptions and positions (msgpack; '' for a relay session).
 *
 * Numbers written back are the caller's decimal strings, never Lua numbers: Lua formats numbers with
 * 14 significant digits, which would corrupt a status_seq above 10^14.
 *
 * Write scripts return 1 (done, or the session is gone: a write for a deleted session is a no-op)
 * or -1 (the caller's fence is stale); APPEND may also refuse a gap or a corrupt record (see there).
 */

/** Loads the fence into `fence` and returns early on a missing session or a stale fence. */
const FENCE_CHECK = `
local fence = redis.call('HGET', KEYS[1], 'f')
if not fence then return 1 end
if tonumber(ARGV[1]) < tonumber(fence) then return -1 end
`;

/** ARGV: static record, agent_ack, suspended_at_ms or '', suspended TTL ms, observer part or ''. */
export const CREATE = `
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'r', ARGV[1], 'a', ARGV[2], 's', ARGV[3], 'f', '1', 't', ARGV[4], 'o', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`;

/** Returns false when gone, else {static, agent_ack, suspended_at_ms, fence, {journal}, observer}. */
export const GET = `
local h = redis.call('HMGET', KEYS[1], 'r', 'a', 's', 'f', 'o')
if not h[1] then return false end
return {h[1], h[2], h[3], h[4], redis.call('ZRANGE', KEYS[2], 0, -1), h[5] or ''}
`;

/** Returns the new fence, or false when the session is gone. */
export const CLAIM = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
return redis.call('HINCRBY', KEYS[1], 'f', 1)
`;

/**
 * ARGV: fence, then (status_seq, member) pairs. Keeps only entries above the highest seq held (or
 * acknowledged), so a redelivery is not journalled twice. Refuses the whole call (returns
 * {-2, highest held}) when its first new entry is not the next seq after the highest held: an
 * earlier append was lost (Redis was unreachable), and storing entries above the gap would let the
 * edge take them, and the missing ones below, for durable (and acknowledge them upstream). The journal
 * gets the record's remaining TTL, so no key of a session outlives it. Returns -3 when agent_ack is not
 * an integer the edge writes (0 to 2^53 - 1, as codec.ts reads it): a value like '1e300' would compare
 * above every seq, and the append would report success while storing nothing.
 */
export const APPEND = `${FENCE_CHECK}
local held = redis.call('HGET', KEYS[1], 'a')
if not held or not string.match(held, '^%d+$') or #held > 16 or tonumber(held) > 9007199254740991 then
  return -3
end
local last = tonumber(held)
local top = redis.call('ZREVRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if top[2] then
  local t = tonumber(top[2])
  if t > last then
    last = t
    held = top[2]
  end
end
local expect = last
for i = 2, #ARGV, 2 do
  local seq = tonumber(ARGV[i])
  if seq > expect then
    if seq ~= expect + 1 then return {-2, held} end
    expect = seq
  end
end
if expect == last then return 1 end
for i = 2, #ARGV, 2 do
  local seq = tonumber(ARGV[i])
  if seq > last then
    redis.call('ZADD', KEYS[2], ARGV[i], ARGV[i + 1])
    last = seq
  end
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
`;

/** ARGV: fence, status_seq. */
export const ACKNOWLEDGE = `${FENCE_CHECK}
if tonumber(ARGV[2]) <= tonumber(redis.call('HGET', KEYS[1], 'a')) then return 1 end
redis.call('HSET', KEYS[1], 'a', ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[2])
return 1
`;

/**
 * ARGV: fence, suspended_at_ms or '' (attached). Both keys expire a reconnect window (+ margin) from
 * now either way: a suspended session when the world would have closed it; an attached one too, unless
 * the replica serving it renews this lease in time — so sessions of a replica that died expire as if
 * their agents had dropped with it.
 */
export const SET_SUSPENDED = `${FENCE_CHECK}
redis.call('HSET', KEYS[1], 's', ARGV[2])
local ttl = redis.call('HGET', KEYS[1], 't')
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
`;

/** ARGV: fence, the observer part (msgpack). */
export const SET_OBSERVER = `${FENCE_CHECK}
redis.call('HSET', KEYS[1], 'o', ARGV[2])
return 1
`;

/**
 * ARGV: fence, or '' for an unconditional delete. With a fence, deletes only if no replica has claimed
 * the session since (its fence is not above the caller's): a replica letting go of a session another
 * replica resumed must not delete it. Returns 1 (deleted, or already gone) or -1 (claimed since: kept).
 */
export const DELETE = `
if ARGV[1] ~= '' then
  local fence = redis.call('HGET', KEYS[1], 'f')
  if fence and tonumber(ARGV[1]) < tonumber(fence) then return -1 end
end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
`;

/** ARGV: a fresh 6-byte epoch. The first replica's value wins; every replica reads it back. */
export const EPOCH = `
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
`;
