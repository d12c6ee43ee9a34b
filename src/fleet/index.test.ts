/**
 * The fleet store's entry point, as sidecar/store.ts and `check` load it. Store scripts are passed
 * explicitly: a connection made with the entry point's STORE_SCRIPTS runs the token scripts on a
 * real redis-server, one made without them cannot, and no fleet module does anything at import
 * time but define, so the order in which they are imported cannot matter.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../clock.js';
import { createLogger } from '../telemetry/logger.js';
import {
  startRedisServer,
  TEST_STORE_COMMAND_TIMEOUT_MS,
  type RedisServer,
} from '../../test/helpers/redis-server.js';
import {
  STORE_SCRIPTS,
  createStoreConnection,
  createTokenSetStore,
  type StoreConnection,
  type StoreScript,
} from './index.js';

let redis: RedisServer;
const connections: StoreConnection[] = [];

function storeWith(scripts: readonly StoreScript[]) {
  const connection = createStoreConnection({
    url: redis.url,
    logger: createLogger({ level: 'silent' }),
    clock: systemClock,
    commandTimeoutMs: TEST_STORE_COMMAND_TIMEOUT_MS,
    scripts,
  });
  connections.push(connection);
  return createTokenSetStore({
    connection,
    leaseTtlMs: 5_000,
    keyPrefix: 'index-test:',
    tokenUrl: 'https://issuer.example/oauth/token/',
    scopes: [],
    readIdentity: () => Promise.resolve({ clientId: 'client-a', clientSecret: 'secret-a' }),
    now: () => Date.now(),
  });
}

beforeAll(async () => {
  redis = await startRedisServer();
});

afterAll(async () => {
  await Promise.all(connections.map((c) => c.close()));
  await redis.close();
});

describe('fleet entry point (real redis-server)', () => {
  it('a connection given STORE_SCRIPTS runs the token scripts: read, lease, publish, read back', async () => {
    const store = storeWith(STORE_SCRIPTS);
    const empty = await store.read();
    expect(empty).toEqual({
      entry: { generation: 0, tokenSet: undefined, unreadable: false },
      leaseHeld: false,
    });
    const { lease } = await store.takeLease(5_000);
    expect(lease).toBeDefined();
    const set = {
      accessToken: 'access-1',
      refreshToken: 'refresh-1',
      sentAt: Date.now(),
      lifetimeSeconds: 600,
      grant: 'client_credentials' as const,
    };
    expect(await store.publish(lease!, set, 0)).toBe(1);
    const back = await store.read();
    expect(back.entry).toMatchObject({ generation: 1, tokenSet: set });
  });

  it('a connection made without the scripts cannot run them: nothing was registered by import', async () => {
    const store = storeWith([]);
    await expect(store.read()).rejects.toThrow(
      /not among the scripts the connection was made with/,
    );
  });
});

describe('fleet modules at import', () => {
  const dir = import.meta.dirname;
  const modules = readdirSync(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));

  /** Top-level statements that run something when the module is imported (a call, an assignment). */
  function importEffects(text: string): string[] {
    const file = ts.createSourceFile('x.ts', text, ts.ScriptTarget.Latest, true);
    return file.statements
      .filter((s) => ts.isExpressionStatement(s) || ts.isIfStatement(s) || ts.isForStatement(s))
      .map((s) => s.getText(file).split('\n')[0]!);
  }

  it('the check finds a registration by import', () => {
    expect(importEffects("const R = new Map();\nR.set('a', 1);\nexport const b = 2;")).toEqual([
      "R.set('a', 1);",
    ]);
  });

  it('no fleet module runs a statement at import, and none defers one to a microtask', () => {
    expect(modules.length).toBeGreaterThan(10);
    const found = modules.flatMap((name) => {
      const text = readFileSync(join(dir, name), 'utf8');
      return [
        ...importEffects(text).map((s) => `${name}: ${s}`),
        ...(/\bqueueMicrotask\b/.test(text) ? [`${name}: queueMicrotask`] : []),
      ];
    });
    expect(found).toEqual([]);
  });
});
