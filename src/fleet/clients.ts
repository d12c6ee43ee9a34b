/**
 * The Redis client of each store mode (docs/token-store.md "Redis Cluster and Sentinel"), behind
 * one small interface: node-redis's own `createClient`, `createCluster` and `createSentinel`, each
 * given the store's scripts through the library's `scripts` option (EVALSHA, EVAL on NOSCRIPT,
 * routed by the first key in a cluster). No client logic of our own beyond choosing the options.
 */
import {
  createClient,
  createCluster,
  createSentinel,
  defineScript as defineRedisScript,
} from '@redis/client';
import type { CommandParser } from '@redis/client';
import { createHash } from 'node:crypto';
import { parseStoreUrl, type StoreUrl } from '../store-url.js';

export type StoreMode = 'standalone' | 'cluster' | 'sentinel';

/** Where the store is and how to reach it. */
export interface StoreAddressOptions {
  url: string;
  mode?: StoreMode;
  sentinelPrimary?: string | undefined;
  sentinelPassword?: string | undefined;
  /** The store's key prefix: a cluster's health check names one key under it (ACL key patterns). */
  keyPrefix?: string | undefined;
}

/** The socket settings every node connection gets. */
export interface SocketPolicy {
  connectTimeout: number;
  reconnectStrategy: (retries: number) => number;
}

/** A script as the client runs it: registered by name when the client is made. */
export interface ClientScript {
  readonly name: string;
  readonly lua: string;
}

export interface StoreClient {
  readonly isReady: boolean;
  readonly isOpen: boolean;
  /** The connection (or the cluster's topology, or the Sentinel's primary) is usable. */
  onReady(listener: () => void): void;
  onError(listener: (error: unknown) => void): void;
  connect(): Promise<unknown>;
  /** Run a registered script on the node that owns `keys[0]`. */
  script(name: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  /**
   * Check every node this process writes to (each master of a cluster) answers and runs scripts:
   * EVALSHA of a one-line script (EVAL when the node does not know it yet). A node that answers
   * PING but refuses scripts (an ACL user without EVALSHA: NOPERM) is not usable.
   */
  ping(): Promise<void>;
  /** `INFO server` of one node. */
  info(): Promise<unknown>;
  /** The node or nodes in use: `host:port` of the server, the cluster's masters, the primary. */
  nodes(): string[];
  close(): Promise<void>;
  destroy(): void;
}

/** Keys, then arguments, as EVALSHA takes them (`numkeys` written by the parser). */
function redisScript(lua: string) {
  return defineRedisScript({
    SCRIPT: lua,
    parseCommand(parser: CommandParser, keys: readonly string[], args: readonly string[]) {
      parser.pushKeysLength([...keys]);
      parser.pushVariadic([...args]);
    },
    transformReply: (reply: unknown) => reply,
  });
}

function scriptsOption(scripts: readonly ClientScript[]) {
  return Object.fromEntries(scripts.map((s) => [s.name, redisScript(s.lua)]));
}

type ScriptMethod = (keys: readonly string[], args: readonly string[]) => Promise<unknown>;

/** A registered script, called as a method of its client (node-redis binds `this`). */
function callScript(
  client: object,
  name: string,
  keys: readonly string[],
  args: readonly string[],
): Promise<unknown> {
  const method = (client as Record<string, ScriptMethod | undefined>)[name];
  if (method === undefined) {
    return Promise.reject(
      new Error(
        `script ${name} is not among the scripts the connection was made with (fleet/scripts.ts)`,
      ),
    );
  }
  return method.call(client, keys, args);
}

/** Make the client of `options.mode` (not connected yet). */
export function makeStoreClient(
  options: StoreAddressOptions,
  socket: SocketPolicy,
  scripts: readonly ClientScript[],
): StoreClient {
  const mode = options.mode ?? 'standalone';
  if (mode === 'standalone') return standalone(options.url, socket, scripts);
  const parsed = parseStoreUrl(options.url);
  if ('problem' in parsed) throw new Error(`store URL: ${parsed.problem}`);
  return mode === 'cluster'
    ? cluster(parsed, `${options.keyPrefix ?? 'oauth-sidecar:'}health`, socket, scripts)
    : sentinel(parsed, options, socket, scripts);
}

/** The health check's script: what every store call needs (EVALSHA, EVAL on NOSCRIPT). */
const CHECK_LUA = "return 'PONG'";
const CHECK_SHA1 = createHash('sha1').update(CHECK_LUA).digest('hex');

/**
 * Run the check script on one node through `send` (that node's raw command). In a cluster it
 * names `key` (never read): a node whose cluster does not serve every slot answers CLUSTERDOWN
 * as it would to the store's scripts, and one that does answers, or redirects (MOVED, ASK) to the
 * key's owner, which says as much.
 */
async function checkNode(send: (args: string[]) => Promise<unknown>, key?: string): Promise<void> {
  const keys = key === undefined ? ['0'] : ['1', key];
  const run = async (args: string[]): Promise<void> => {
    try {
      await send(args);
    } catch (error) {
      if (!(error instanceof Error && /^(MOVED|ASK) /.test(error.message))) throw error;
    }
  };
  try {
    await run(['EVALSHA', CHECK_SHA1, ...keys]);
  } catch (error) {
    if (!(error instanceof Error && error.message.startsWith('NOSCRIPT'))) throw error;
    await run(['EVAL', CHECK_LUA, ...keys]);
  }
}

/** What every node-redis client (single, cluster, Sentinel) has in common, as used here. */
interface NodeRedisClient {
  readonly isReady: boolean;
  readonly isOpen: boolean;
  on(
    event: 'ready' | 'connect' | 'error' | 'node-error',
    listener: (error: unknown) => void,
  ): unknown;
  connect(): Promise<unknown>;
  close(): Promise<unknown>;
  destroy(): unknown;
}

/**
 * How one mode differs: the event that means usable, the events that report a failed connection,
 * and how it checks its nodes, reads INFO, names nodes.
 */
interface ModeParts {
  readyEvent: 'ready' | 'connect';
  /** A cluster reports a master it cannot reach as `node-error`, not `error`. */
  errorEvents?: readonly ('error' | 'node-error')[];
  ping: () => Promise<void>;
  info: () => Promise<unknown>;
  nodes: () => string[];
}

/** One {@link StoreClient} over any node-redis client. */
function adapt(client: NodeRedisClient, parts: ModeParts): StoreClient {
  return {
    get isReady() {
      return client.isReady;
    },
    get isOpen() {
      return client.isOpen;
    },
    onReady: (listener) => void client.on(parts.readyEvent, listener),
    onError: (listener) => {
      for (const event of parts.errorEvents ?? ['error']) client.on(event, listener);
    },
    connect: () => client.connect(),
    script: (name, keys, args) => callScript(client, name, keys, args),
    ping: parts.ping,
    info: parts.info,
    nodes: parts.nodes,
    close: async () => void (await client.close()),
    destroy: () => {
      const destroyed = client.destroy();
      // A Sentinel client's destroy is a promise; nothing waits for it.
      if (destroyed instanceof Promise) destroyed.catch(() => undefined);
    },
  };
}

function standalone(url: string, socket: SocketPolicy, scripts: readonly ClientScript[]) {
  const client = createClient({
    url,
    // Fail at once while disconnected instead of queueing: the keeper falls back to its own token.
    disableOfflineQueue: true,
    socket,
    scripts: scriptsOption(scripts),
  });
  const parsed = parseStoreUrl(url);
  const node = 'problem' in parsed ? [] : parsed.nodes.map((n) => `${n.host}:${n.port ?? 6379}`);
  return adapt(client, {
    readyEvent: 'ready',
    ping: () => checkNode((args) => client.sendCommand(args)),
    info: () => client.sendCommand(['INFO', 'server']),
    nodes: () => node,
  });
}

/** Credentials and TLS of the URL, for the data nodes. */
function nodeOptions(parsed: StoreUrl, socket: SocketPolicy) {
  return {
    ...(parsed.username !== undefined && { username: parsed.username }),
    ...(parsed.password !== undefined && { password: parsed.password }),
    disableOfflineQueue: true,
    socket: { ...socket, ...(parsed.tls && { tls: true as const }) },
  };
}

/** Seed nodes; the topology is discovered and re-discovered by node-redis (MOVED, fail-over). */
function cluster(
  parsed: StoreUrl,
  checkKey: string,
  socket: SocketPolicy,
  scripts: readonly ClientScript[],
) {
  const client = createCluster({
    rootNodes: parsed.nodes.map((node) => ({ url: node.url })),
    defaults: nodeOptions(parsed, socket),
    scripts: scriptsOption(scripts),
    // A master that stops answering: ask the others for the new topology after 1 s of
    // reconnecting (the library waits 5 s by default), so a promoted replica is used at once.
    topologyRefreshOnReconnectionAttemptStrategy: 1_000,
  });
  return adapt(client, {
    readyEvent: 'connect',
    errorEvents: ['error', 'node-error'],
    // Every master: a cluster with one master lost is a store that is (partly) down.
    ping: async () => {
      await Promise.all(
        client.masters.map(async (master) => {
          const node = await client.nodeClient(master);
          await checkNode((args) => node.sendCommand(args), checkKey);
        }),
      );
    },
    info: () => client.sendCommand(undefined, true, ['INFO', 'server']),
    nodes: () => client.masters.map((m) => `${m.host}:${m.port}`),
  });
}

/** The sentinels find the primary and follow its promotion (node-redis `createSentinel`). */
function sentinel(
  parsed: StoreUrl,
  options: StoreAddressOptions,
  socket: SocketPolicy,
  scripts: readonly ClientScript[],
) {
  const client = createSentinel({
    name: options.sentinelPrimary ?? '',
    sentinelRootNodes: parsed.nodes.map((node) => ({ host: node.host, port: node.port ?? 26379 })),
    nodeClientOptions: {
      ...nodeOptions(parsed, socket),
      ...(parsed.db !== undefined && { database: parsed.db }),
    },
    sentinelClientOptions: {
      ...(options.sentinelPassword !== undefined && { password: options.sentinelPassword }),
      socket: { ...socket, ...(parsed.tls && { tls: true as const }) },
    },
    scripts: scriptsOption(scripts),
    masterPoolSize: 1,
  });
  return adapt(client, {
    readyEvent: 'ready',
    ping: () => checkNode((args) => client.sendCommand(false, args)),
    info: () => client.sendCommand(false, ['INFO', 'server']),
    nodes: () => {
      const primary = client.getMasterNode();
      return primary === undefined ? [] : [`${primary.host}:${primary.port}`];
    },
  });
}
