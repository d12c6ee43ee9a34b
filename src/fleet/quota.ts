/**
 * The fleet-wide half of the quota guard (docs/quota-guard.md): the rate-limit bucket and the
 * cooldown of one upstream, kept in the store so every sidecar of the fleet shares them. Each
 * decision is one atomic script on the store's clock (`TIME`), so process clocks do not matter.
 */
import { createHash } from 'node:crypto';
import { STORE_NOW_MS_LUA, defineScript, hashTagged, type StoreConnection } from './connection.js';
import type { SharedCooldown, SharedQuota } from './ports.js';
import { TYPED_READS_LUA } from './typed-reads.js';

export interface StoreQuota extends SharedQuota {
  /** The keys, for tests and operators (`<prefix>quota:<hash>:bucket|cooldown|callers`). */
  readonly keys: { bucket: string; cooldown: string; callers: string };
}

export interface StoreQuotaOptions {
  connection: Pick<StoreConnection, 'runScript' | 'health' | 'hashTags'>;
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
 * says is never trusted"). Keys of the wrong type are deleted first (typed-reads.ts): a forged one
 * is absent, never an error that makes the store look down.
 */
const COOLDOWN_LEFT_LUA =
  TYPED_READS_LUA +
  `
local function cooldown_left(key, cap)
  hash_or_none(key)
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
 * One rate-limit decision, shared fairly between callers (docs/quota-guard.md "Fair share
 * between callers"). KEYS: bucket, cooldown, callers. ARGV: count, periodMs, cap (ms), demand TTL
 * (ms), most callers, lease reserve (slots), then per caller asking: name, weight, rank (0
 * interactive, 1 batch), want, lease (extra slots for this member's leased batch).
 * The callers hash holds each caller seen within a period (`vt,weight,rank,seen,want`) and the
 * fleet's virtual time (`~v`): a slot goes to the caller with the smallest key among those whose
 * want is fresh, as fair-queue.ts does in one process; a slot due to another member's caller stays
 * in the bucket for it. Returns {granted, waitMs, milli-slots left, cooldownStatus (0: none),
 * cooldownMsLeft, grant per caller asking...}: Lua numbers reach the client as integers, so the
 * fractional slot count travels in thousandths. During a cooldown nothing is granted and the
 * bucket is untouched. Leased batches (docs/capacity.md "Leased batches"): once every caller
 * wanting a slot is served and nobody else's is next, this member's callers take up to `lease`
 * more each, in the same fair order (charged to their virtual time), but only while the bucket
 * keeps more than `reserve` slots: a scarce bucket grants no batch, and the wants stored for the
 * rest of the fleet are the waiters only.
 */
const TAKE = defineScript(
  STORE_NOW_MS_LUA +
    COOLDOWN_LEFT_LUA +
    `
local asking = (#ARGV - 6) / 5
local grants = {}
for j = 1, asking do grants[j] = 0 end
local function reply(granted, wait, tokens, status, left)
  local out = { granted, wait, tokens, status, left }
  for j = 1, asking do out[5 + j] = grants[j] end
  return out
end
local cd = cooldown_left(KEYS[2], tonumber(ARGV[3]))
if cd then return reply(0, 0, 0, cd[1], math.ceil(cd[2])) end
local count = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local ttl = tonumber(ARGV[4])
local max_callers = tonumber(ARGV[5])
local reserve = tonumber(ARGV[6])
local interval = period / count
hash_or_none(KEYS[1])
hash_or_none(KEYS[3])
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
-- The callers, each checked: a field that does not parse, a weight or rank out of range, a time
-- ahead of this clock or older than a period is dropped; a virtual time is held within one
-- period's worth ahead of the fleet's or one turn behind, so a forged or restored entry neither
-- starves nor favours.
local v = 0
local callers = {}
local known = 0
local raw = redis.call('HGETALL', KEYS[3])
for i = 1, #raw, 2 do
  if raw[i] == '~v' then
    v = tonumber(raw[i + 1]) or 0
  else
    local f = {}
    for part in string.gmatch(raw[i + 1], '[^,]+') do f[#f + 1] = tonumber(part) end
    local vt, w, r, seen, want = f[1], f[2], f[3], f[4], f[5]
    if #f == 5 and vt and w and r and seen and want and vt == vt and w >= 1 and w <= 1000
      and (r == 0 or r == 1) and seen <= now_ms and seen > now_ms - period and want >= 0
      and known < max_callers then
      callers[raw[i]] = { vt = vt, w = w, r = r, seen = seen, want = math.min(want, 100000) }
      known = known + 1
    else
      redis.call('HDEL', KEYS[3], raw[i])
    end
  end
end
if v ~= v or v < 0 or v > 1e15 then v = 0 end
-- A waiting caller's virtual time never lags the fleet's by more than one turn (1/weight <= 1).
for _, c in pairs(callers) do
  if c.vt < v - 1 then c.vt = v - 1 end
  if c.vt > v + count then c.vt = v + count end
end
for j = 1, asking do
  local name = ARGV[2 + 5 * j]
  local c = callers[name]
  if c == nil then
    -- A full table: the newcomer is served only when nobody recorded wants a slot.
    local full = known >= max_callers
    c = { vt = full and v + count or v, w = 1, r = 1, seen = now_ms, want = 0, unrecorded = full }
    callers[name] = c
    if not c.unrecorded then known = known + 1 end
  end
  -- A caller that starts asking again starts at the fleet's virtual time: idle time banks nothing.
  if c.want == 0 or c.seen <= now_ms - ttl then c.vt = math.max(c.vt, v) end
  c.w = math.max(1, math.min(1000, tonumber(ARGV[3 + 5 * j]) or 1))
  c.r = (ARGV[4 + 5 * j] == '1') and 1 or 0
  c.seen = now_ms
  c.want = math.max(0, math.min(100000, tonumber(ARGV[5 + 5 * j]) or 0))
  c.lease = math.max(0, math.min(100000, tonumber(ARGV[6 + 5 * j]) or 0))
  c.mine = j
end
local granted = 0
local held = false
-- A caller's place in the fleet's fair order: its virtual time, a batch caller's one turn later.
local function order_key(c)
  if c.r == 1 then return c.vt + 1 / c.w end
  return c.vt
end
-- The fleet's fair order: of the live callers \`wants\` accepts, the one with the smallest key,
-- names breaking ties.
local function first_in_order(wants)
  local best, best_name, best_key = nil, nil, math.huge
  for name, c in pairs(callers) do
    if wants(c) and c.seen > now_ms - ttl then
      local key = order_key(c)
      if key < best_key or (key == best_key and name < best_name) then
        best, best_name, best_key = c, name, key
      end
    end
  end
  return best
end
local function waiting(c) return c.want > 0 end
-- A caller of this member with a lease asked for, or another member's caller waiting.
local function leasing(c) return (c.mine ~= nil and c.lease > 0) or (c.mine == nil and c.want > 0) end
while tokens >= 1 - 1e-9 do
  local best = first_in_order(waiting)
  if best == nil then break end
  -- The slot is due to another member's caller: it stays in the bucket for that member.
  if best.mine == nil then
    held = true
    break
  end
  tokens = tokens - 1
  v = best.vt
  best.vt = v + 1 / best.w
  best.want = best.want - 1
  grants[best.mine] = grants[best.mine] + 1
  granted = granted + 1
end
-- The leased batch: only from a plentiful bucket, only while this member's callers come next.
if not held then
  while tokens - 1 >= reserve - 1e-9 do
    local best = first_in_order(leasing)
    if best == nil or best.mine == nil then break end
    tokens = tokens - 1
    v = best.vt
    best.vt = v + 1 / best.w
    best.lease = best.lease - 1
    grants[best.mine] = grants[best.mine] + 1
    granted = granted + 1
  end
end
if tokens < 0 then tokens = 0 end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', ts))
-- A full bucket is the same as no key: let idle buckets expire.
redis.call('PEXPIRE', KEYS[1], math.ceil(period) + 1000)
-- Only the callers asking changed; the others' clamps are applied again on every read.
for j = 1, asking do
  local name = ARGV[2 + 5 * j]
  local c = callers[name]
  if not c.unrecorded then
    redis.call('HSET', KEYS[3], name, string.format('%.17g,%d,%d,%d,%d', c.vt, c.w, c.r, c.seen, c.want))
  end
end
redis.call('HSET', KEYS[3], '~v', string.format('%.17g', v))
redis.call('PEXPIRE', KEYS[3], math.ceil(period) + 1000)
-- 0: slots are left for anyone; else when this member's turn comes (the fair order carried on
-- without tokens: each other member's caller with a smaller key takes the slots its key and weight
-- place first), so a waiting member asks once per turn, not at every slot (docs/capacity.md).
local mine_key = math.huge
for j = 1, asking do
  local c = callers[ARGV[2 + 5 * j]]
  if c.want > 0 then
    local key = order_key(c)
    if key < mine_key then mine_key = key end
  end
end
local ahead = 0
if mine_key < math.huge then
  for _, c in pairs(callers) do
    if c.mine == nil and c.want > 0 and c.seen > now_ms - ttl then
      local key = order_key(c)
      if key < mine_key then ahead = ahead + math.min(c.want, math.ceil((mine_key - key) * c.w)) end
    end
  end
end
local wait = 0
if tokens < 1 - 1e-9 then wait = math.ceil((ahead + 1 - tokens) * interval)
elseif held then wait = math.max(math.ceil(interval), math.ceil((ahead + 1 - tokens) * interval)) end
return reply(granted, wait, math.floor(tokens * 1000), 0, 0)
`,
);

/** Start or extend the cooldown. KEYS: cooldown. ARGV: status, ms. Never shortens one in force. */
const START_COOLDOWN = defineScript(
  STORE_NOW_MS_LUA +
    TYPED_READS_LUA +
    `
hash_or_none(KEYS[1])
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

/** This module's scripts, for fleet/scripts.ts. */
export const QUOTA_SCRIPTS = [TAKE, START_COOLDOWN, READ_COOLDOWN];

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

/** Most callers the store keeps (`<prefix>quota:<hash>:callers`); newcomers beyond are served last. */
export const MAX_STORED_CALLERS = 256;

/**
 * How long a caller's want counts without being renewed: a member with waiters asks again at
 * least once per slot interval, so two intervals (at least 1 s, at most a period) cover it; a
 * member that went away holds no slot longer than that.
 */
export function demandTtlMs(rateLimit: { count: number; periodMs: number }): number {
  const interval = rateLimit.periodMs / rateLimit.count;
  return Math.ceil(Math.min(rateLimit.periodMs, Math.max(1_000, 2 * interval)));
}

/**
 * Slots a leased batch never takes (docs/capacity.md "Leased batches"): half the bucket. Below it
 * the bucket is scarce and every slot is decided one request at a time, in the fleet's fair order.
 */
export function leaseReserve(rateLimit: { count: number }): number {
  return rateLimit.count / 2;
}

/** The keys of one upstream's quota (in a cluster they share one hash tag). */
function quotaKeys(options: StoreQuotaOptions): StoreQuota['keys'] {
  const id = hashTagged(
    createHash('sha256').update(options.upstream).digest('hex').slice(0, 16),
    // Redis Cluster: the bucket, its cooldown and its callers share a hash tag.
    options.connection.hashTags === true,
  );
  return {
    bucket: `${options.keyPrefix}quota:${id}:bucket`,
    cooldown: `${options.keyPrefix}quota:${id}:cooldown`,
    callers: `${options.keyPrefix}quota:${id}:callers`,
  };
}

/** The fleet-wide quota of one upstream. Keys hold no secret: a hash of the upstream URL. */
export function createStoreQuota(options: StoreQuotaOptions): StoreQuota {
  const keys = quotaKeys(options);
  const all = [keys.bucket, keys.cooldown, keys.callers];
  const { connection, rateLimit } = options;
  const capMs = Math.max(0, Math.ceil(options.maxCooldownMs));

  return {
    keys,
    async take(demands) {
      if (rateLimit === undefined) throw new Error('store quota: no rate limit configured');
      const { count, periodMs } = rateLimit;
      const args = [
        String(count),
        String(periodMs),
        String(capMs),
        String(demandTtlMs(rateLimit)),
        String(MAX_STORED_CALLERS),
        String(leaseReserve(rateLimit)),
      ];
      for (const d of demands) {
        const rank = d.priority === 'batch' ? '1' : '0';
        args.push(d.caller, String(d.weight), rank, String(d.want), String(d.lease ?? 0));
      }
      const reply = await connection.runScript(TAKE, all, args);
      const [, waitMs = 0, milliTokens = 0, status = 0, msLeft = 0, ...each] = numbers(
        reply,
        5 + demands.length,
        'quota take',
      );
      // Never more than asked, never a wait longer than one refill of the whole bucket.
      const grants = demands.map((d, i) => Math.min(each[i] ?? 0, d.want + (d.lease ?? 0)));
      return {
        granted: grants.reduce((a, b) => a + b, 0),
        grants,
        waitMs: Math.min(waitMs, periodMs),
        tokens: Math.min(milliTokens / 1000, count),
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
