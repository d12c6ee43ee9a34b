/**
 * Lua helpers that read a key only if it is of the expected type and size (docs/token-store.md
 * "What the store says is never trusted"): a value larger than its kind can be never leaves the
 * server, so a forged one costs a reader no memory, and a key of another type is a miss (never a
 * `WRONGTYPE` error that would make the whole store look down) that the next writer replaces.
 */

/** What a bounded read returns in place of a value that is too large: it never opens. */
export const OVERSIZED = 'oversized';

/**
 * `get_bounded(key, max)`: the string at `key` (false when absent), and true as a second value
 * when the key holds something else (another type, or a string over `max` bytes).
 * `string_or_none(key)`: DEL `key` unless it is absent or a string; a writer runs it first.
 * `hmget_bounded(key, max, fields)`: the fields of a hash (false when absent), each over `max`
 * bytes read as {@link OVERSIZED}; a key of another type reads as absent.
 * `hash_or_none(key)`: DEL `key` unless it is absent or a hash.
 */
export const TYPED_READS_LUA = `
local function get_bounded(key, max)
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' then return false, false end
  if t ~= 'string' or redis.call('STRLEN', key) > max then return false, true end
  return redis.call('GET', key), false
end
local function string_or_none(key)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= 'string' then redis.call('DEL', key) end
end
local function hmget_bounded(key, max, fields)
  local out = {}
  local is_hash = redis.call('TYPE', key)['ok'] == 'hash'
  for i, f in ipairs(fields) do
    out[i] = false
    if is_hash then
      if redis.call('HSTRLEN', key, f) > max then out[i] = '${OVERSIZED}'
      else out[i] = redis.call('HGET', key, f) end
    end
  end
  return out
end
local function hash_or_none(key)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= 'hash' then redis.call('DEL', key) end
end
`;
