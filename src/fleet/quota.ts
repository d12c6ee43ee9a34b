/**
 * The fleet-wide half of the quota guard (docs/quota-guard.md): the rate-limit bucket and the
 * cooldown of one upstream, kept in the store so every sidecar of the fleet shares them. Each
 * decision is one atomic script on the store's clock (`TIME`), so process clocks do not matter.
 */
import { createHash } from 'node:crypto';
import { STORE_NOW_MS_LUA, defineScript, type StoreConnection } from './connection.js';
import type { SharedCooldown, SharedQuota } from './ports.js';

export interface StoreQuota extends SharedQuota {
  /** The two keys, for tests and operators (`<prefix>quota:<hash>:bucket|cooldown`). */
  readonly keys: { bucket: string; cooldown: string };
}

export interface StoreQuotaOptions {
  connection: Pick<StoreConnection, 'runScript' | 'health'>;
  keyPrefix: string;
  /** The upstream whose quota this is (`upstream.baseUrl`); hashed into the keys. */
  upstream: string;
  /** `upstream.rateLimit`; without one only the cooldown is shared. */
  rateLimit: { count: number; periodMs: number } | undefined;
  /**
   * This reader's own `upstream.maxCooldownSeconds` in ms: no cooldown read from the store lasts
   * longer, whatever another member (or whoever writes the store) put there.
   */
  maxCooldownMs: number;
}

/**
 * Lua: a cooldown in force? → `{status, msLeft}` else nil. Expects `now_ms`. `cap`: the reader's
 * own max cooldown (ms). A cooldown ending later than now + cap (a member with a larger cap, a
 * forged or restored entry, a key without expiry) is cut to now + cap in the store, with an expiry,
 * so it ends for the whole fleet instead of lasting for ever (docs/token-store.md "What the store
 * says is never trusted").
 */
const COOLDOWN_LEFT_LUA = `
local function cooldown_left(key, cap)
  local cd = redis.call('HMGET', key, 'until', 'status')
  local until_ms = tonumber(cd[1])
  if until_ms == nil or until_ms ~= until_ms then return nil end
  local left = until_ms - now_ms
  if left <= 0 then return nil end
  if left > cap or redis.call('PTTL', key) < 0 then
    if left > cap then left = cap end
    redis.call('HSET', key, 'until', string.format('%d', now_ms + left))
    redis.call('PEXPIRE', key, math.ceil(left) + 1000)
  end
  return { tonumber(cd[2]) or 429, left }
end
`;

/**
 * One rate-limit decision. KEYS: bucket, cooldown. ARGV: count, periodMs, want, cap (ms).
 * Returns {granted, waitMs, milli-slots left, cooldownStatus (0: none), cooldownMsLeft}: Lua
 * numbers reach the client as integers, so the fractional slot count travels in thousandths.
 * During a cooldown nothing is granted and the bucket is untouched.
 */
const TAKE = defineScript(
  STORE_NOW_MS_LUA +
    COOLDOWN_LEFT_LUA +
    `
local cd = cooldown_left(KEYS[2], tonumber(ARGV[4]))
if cd then return { 0, 0, 0, cd[1], math.ceil(cd[2]) } end
local count = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local interval = period / count
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1])
local ts = tonumber(b[2])
-- What the bucket holds is checked, never trusted: NaN, out-of-range slot counts and a timestamp
-- ahead of this clock (a failover to a server whose clock is behind, a forged key) would stall
-- admission until the store's clock caught up, since each take re-arms the key.
if tokens == nil or ts == nil or tokens ~= tokens or ts ~= ts then
  tokens = count
  ts = now_ms
end
if tokens > count then tokens = count end
if tokens < 0 then tokens = 0 end
if ts > now_ms then ts = now_ms end
if now_ms > ts then
  tokens = math.min(count, tokens + (now_ms - ts) / interval)
  ts = now_ms
end
local granted = math.floor(tokens + 1e-9)
if granted > want then granted = want end
if granted < 0 then granted = 0 end
tokens = tokens - granted
if tokens < 0 then tokens = 0 end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', ts))
-- A full bucket is the same as no key: let idle buckets expire.
redis.call('PEXPIRE', KEYS[1], math.ceil(period) + 1000)
local wait = 0
if tokens < 1 - 1e-9 then wait = math.ceil((1 - tokens) * interval) end
return { granted, wait, math.floor(tokens * 1000), 0, 0 }
`,
);

/** Start or extend the cooldown. KEYS: cooldown. ARGV: status, ms. Never shortens one in force. */
const START_COOLDOWN = defineScript(
  STORE_NOW_MS_LUA +
    `
local until_ms = now_ms + tonumber(ARGV[2])
local current = tonumber(redis.call('HGET', KEYS[1], 'until'))
if current ~= nil and current >= until_ms then return 0 end
redis.call('HSET', KEYS[1], 'until', string.format('%d', until_ms), 'status', ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + 1000)
return 1
`,
);

/** KEYS: cooldown. ARGV: cap (ms). Returns {status, msLeft} or {0, 0}. */
const READ_COOLDOWN = defineScript(
  STORE_NOW_MS_LUA +
    COOLDOWN_LEFT_LUA +
    `
local cd = cooldown_left(KEYS[1], tonumber(ARGV[1]))
if cd then return { cd[1], math.ceil(cd[2]) } end
return { 0, 0 }
`,
);

/**
 * The one place a quota script's reply is parsed: each number is checked (an integer, not
 * negative, at most 2^53) and out-of-range values are absent (0), never taken at face value.
 */
function numbers(reply: unknown, length: number, what: string): number[] {
  if (!Array.isArray(reply) || reply.length !== length) {
    throw new Error(`store ${what}: unexpected reply`);
  }
  return reply.map((value) => {
    const n = typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : NaN;
    return Number.isSafeInteger(n) && n >= 0 ? n : 0;
  });
}

/** A cooldown only with a known status, clamped to the reader's own cap. */
function cooldownOf(status: number, msLeft: number, capMs: number): SharedCooldown | undefined {
  if (status !== 429 && status !== 503) return undefined;
  return msLeft > 0 ? { status, msLeft: Math.min(msLeft, capMs) } : undefined;
}

/** The fleet-wide quota of one upstream. Keys hold no secret: a hash of the upstream URL. */
export function createStoreQuota(options: StoreQuotaOptions): StoreQuota {
  const id = createHash('sha256').update(options.upstream).digest('hex').slice(0, 16);
  const keys = {
    bucket: `${options.keyPrefix}quota:${id}:bucket`,
    cooldown: `${options.keyPrefix}quota:${id}:cooldown`,
  };
  const both = [keys.bucket, keys.cooldown];
  const { connection, rateLimit } = options;
  const capMs = Math.max(0, Math.ceil(options.maxCooldownMs));

  return {
    keys,
    async take(want) {
      if (rateLimit === undefined) throw new Error('store quota: no rate limit configured');
      const reply = await connection.runScript(TAKE, both, [
        String(rateLimit.count),
        String(rateLimit.periodMs),
        String(want),
        String(capMs),
      ]);
      const [granted = 0, waitMs = 0, milliTokens = 0, status = 0, msLeft = 0] = numbers(
        reply,
        5,
        'quota take',
      );
      // Never more than asked, never a wait longer than one refill of the whole bucket.
      return {
        granted: Math.min(granted, want),
        waitMs: Math.min(waitMs, rateLimit.periodMs),
        tokens: Math.min(milliTokens / 1000, rateLimit.count),
        cooldown: cooldownOf(status, msLeft, capMs),
      };
    },
    async startCooldown(status, ms) {
      await connection.runScript(
        START_COOLDOWN,
        [keys.cooldown],
        [String(status), String(Math.ceil(ms))],
      );
    },
    async readCooldown() {
      const reply = await connection.runScript(READ_COOLDOWN, [keys.cooldown], [String(capMs)]);
      const [status = 0, msLeft = 0] = numbers(reply, 2, 'quota cooldown');
      return cooldownOf(status, msLeft, capMs);
    },
    health: () => connection.health(),
  };
}
