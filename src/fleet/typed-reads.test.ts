/**
 * The Lua helpers that read a key only if it is of the expected type and size, run by a real
 * redis-server (docs/token-store.md "What the store says is never trusted"): a value too large or
 * of another type never leaves the server, and a writer replaces a key of the wrong type.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../clock.js';
import { createLogger } from '../telemetry/logger.js';
import {
  startRedisServer,
  TEST_STORE_COMMAND_TIMEOUT_MS,
  type RedisServer,
} from '../../test/helpers/redis-server.js';
import { createStoreConnection, defineScript, type StoreConnection } from './connection.js';
import { OVERSIZED, TYPED_READS_LUA } from './typed-reads.js';

/** Runs one helper on KEYS[1]: ARGV[1] names it, ARGV[2] is the size bound. */
const PROBE = defineScript(`${TYPED_READS_LUA}
local what, max = ARGV[1], tonumber(ARGV[2])
if what == 'get' then
  local v, other = get_bounded(KEYS[1], max)
  return {v or '(absent)', other and 'other' or 'same'}
elseif what == 'hmget' then
  local out = hmget_bounded(KEYS[1], max, {'f1', 'f2'})
  for i, v in ipairs(out) do if v == false then out[i] = '(absent)' end end
  return out
elseif what == 'string_or_none' then
  string_or_none(KEYS[1])
else
  hash_or_none(KEYS[1])
end
return redis.call('TYPE', KEYS[1])['ok']
`);

let redis: RedisServer;
let connection: StoreConnection;
const probe = (what: string, key: string, max = 5) =>
  connection.runScript(PROBE, [key], [what, String(max)]);

beforeAll(async () => {
  redis = await startRedisServer();
  connection = createStoreConnection({
    url: redis.url,
    logger: createLogger({ level: 'silent' }),
    clock: systemClock,
    commandTimeoutMs: TEST_STORE_COMMAND_TIMEOUT_MS,
    scripts: [PROBE],
  });
});

afterAll(async () => {
  await connection.close();
  await redis.close();
});

describe('typed reads (real redis-server)', () => {
  it('get_bounded: a string within the bound; absent; too large or another type reads as other', async () => {
    await redis.command('SET', 'str', 'hello');
    await redis.command('SET', 'long', 'hello!');
    await redis.command('HSET', 'hash', 'f1', 'x');
    expect(await probe('get', 'str')).toEqual(['hello', 'same']);
    expect(await probe('get', 'missing')).toEqual(['(absent)', 'same']);
    expect(await probe('get', 'long')).toEqual(['(absent)', 'other']);
    expect(await probe('get', 'hash')).toEqual(['(absent)', 'other']);
  });

  it('hmget_bounded: each field within the bound, one over it oversized, another type absent', async () => {
    await redis.command('HSET', 'h1', 'f1', 'short', 'f2', 'too long');
    await redis.command('SET', 'not-a-hash', 'x');
    expect(await probe('hmget', 'h1')).toEqual(['short', OVERSIZED]);
    expect(await probe('hmget', 'h-missing')).toEqual(['(absent)', '(absent)']);
    expect(await probe('hmget', 'not-a-hash')).toEqual(['(absent)', '(absent)']);
  });

  it('string_or_none and hash_or_none delete a key of the other type, keep their own', async () => {
    await redis.command('HSET', 'was-hash', 'f1', 'x');
    await redis.command('SET', 'is-string', 'x');
    expect(await probe('string_or_none', 'was-hash')).toBe('none');
    expect(await probe('string_or_none', 'is-string')).toBe('string');

    await redis.command('SET', 'was-string', 'x');
    await redis.command('HSET', 'is-hash', 'f1', 'x');
    expect(await probe('hash_or_none', 'was-string')).toBe('none');
    expect(await probe('hash_or_none', 'is-hash')).toBe('hash');
    expect(await probe('hash_or_none', 'absent')).toBe('none');
  });
});
