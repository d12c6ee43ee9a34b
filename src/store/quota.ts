/**
 * The fleet-wide half of the quota guard (docs/quota-guard.md): the rate-limit bucket and the
 * cooldown of one upstream, kept in the store so every sidecar of the fleet shares them. Each
 * decision is one atomic script on the store's clock (`TIME`), so process clocks do not matter.
 * The proxy sees this only through its `SharedQuota` interface (proxy/quota/guard.ts), which these
 * shapes match structurally; store/ does not import proxy/.
 */
import { createHash } from 'node:crypto';
import { STORE_NOW_MS_LUA, defineScript, type StoreConnection } from './connection.js';

export type QuotaCooldownStatus = 429 | 503;

export interface StoreCooldown {
  status: QuotaCooldownStatus;
  msLeft: number;
}

export interface StoreQuotaDecision {
  granted: number;
  waitMs: number;
  tokens: number;
  cooldown: StoreCooldown | undefined;
}

export interface StoreQuota {
  take(want: number): Promise<StoreQuotaDecision>;
  startCooldown(status: QuotaCooldownStatus, ms: number): Promise<void>;
  readCooldown(): Promise<StoreCooldown | undefined>;
  /** The two keys, for tests and operators (`<prefix>quota:<hash>:bucket|cooldown`). */
  readonly keys: { bucket: string; cooldown: string };
}

export interface StoreQuotaOptions {
  connection: Pick<StoreConnection, 'runScript'>;
  keyPrefix: string;
  /** The upstream whose quota this is (`upstream.baseUrl`); hashed into the keys. */
  upstream: string;
  /** `upstream.rateLimit`; without one only the cooldown is shared. */
  rateLimit: { count: number; periodMs: number } | undefined;
}

/** Lua: a cooldown in force? → `{status, msLeft}` else nil. Expects `now_ms` and KEYS[2]. */
const COOLDOWN_LEFT_LUA = `
local function cooldown_left(key)
  local cd = redis.call('HMGET', key, 'until', 'status')
  local until_ms = tonumber(cd[1])
  if until_ms == nil then return nil end
  local left = until_ms - now_ms
  if left <= 0 then return nil end
  return { tonumber(cd[2]) or 429, left }
end
`;

/**
 * One rate-limit decision. KEYS: bucket, cooldown. ARGV: count, periodMs, want.
 * Returns {granted, waitMs, milli-slots left, cooldownStatus (0: none), cooldownMsLeft}: Lua
 * numbers reach the client as integers, so the fractional slot count travels in thousandths.
 * During a cooldown nothing is granted and the bucket is untouched.
 */
const TAKE = defineScript(
  STORE_NOW_MS_LUA +
    COOLDOWN_LEFT_LUA +
    `
local cd = cooldown_left(KEYS[2])
if cd then return { 0, 0, 0, cd[1], math.ceil(cd[2]) } end
local count = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local interval = period / count
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1])
local ts = tonumber(b[2])
if tokens == nil or ts == nil then
  tokens = count
  ts = now_ms
end
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

/** KEYS: cooldown. Returns {status, msLeft} or {0, 0}. */
const READ_COOLDOWN = defineScript(
  STORE_NOW_MS_LUA +
    COOLDOWN_LEFT_LUA +
    `
local cd = cooldown_left(KEYS[1])
if cd then return { cd[1], math.ceil(cd[2]) } end
return { 0, 0 }
`,
);

function numbers(reply: unknown, length: number, what: string): number[] {
  if (!Array.isArray(reply) || reply.length !== length) {
    throw new Error(`store ${what}: unexpected reply`);
  }
  return reply.map((value) => Number(value));
}

function cooldownOf(status: number, msLeft: number): StoreCooldown | undefined {
  if (status !== 429 && status !== 503) return undefined;
  return msLeft > 0 ? { status, msLeft } : undefined;
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

  return {
    keys,
    async take(want) {
      if (rateLimit === undefined) throw new Error('store quota: no rate limit configured');
      const reply = await connection.runScript(TAKE, both, [
        String(rateLimit.count),
        String(rateLimit.periodMs),
        String(want),
      ]);
      const [granted = 0, waitMs = 0, milliTokens = 0, status = 0, msLeft = 0] = numbers(
        reply,
        5,
        'quota take',
      );
      return { granted, waitMs, tokens: milliTokens / 1000, cooldown: cooldownOf(status, msLeft) };
    },
    async startCooldown(status, ms) {
      await connection.runScript(
        START_COOLDOWN,
        [keys.cooldown],
        [String(status), String(Math.ceil(ms))],
      );
    },
    async readCooldown() {
      const reply = await connection.runScript(READ_COOLDOWN, [keys.cooldown], []);
      const [status = 0, msLeft = 0] = numbers(reply, 2, 'quota cooldown');
      return cooldownOf(status, msLeft);
    },
  };
}
