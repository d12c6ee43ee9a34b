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
import { parseStoreUrl, type StoreUrl } from '../store-url.js';

export type StoreMode = 'standalone' | 'cluster' | 'sentinel';

/** Where the store is and how to reach it. */
export interface StoreAddressOptions {
  url: string;
  mode?: StoreMode;
  sentinelPrimary?: string | undefined;
  sentinelPassword?: string | undefined;
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
  /** PING every node this process writes to (each master of a cluster). */
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
    ? cluster(parsed, socket, scripts)
    : sentinel(parsed, options, socket, scripts);
}

/** What every node-redis client (single, cluster, Sentinel) has in common, as used here. */
interface NodeRedisClient {
  readonly isReady: boolean;
  readonly isOpen: boolean;
  on(event: 'ready' | 'connect' | 'error', listener: (error: unknown) => void): unknown;
  connect(): Promise<unknown>;
  close(): Promise<unknown>;
  destroy(): unknown;
}

/** How one mode differs: the event that means usable, and how it pings, reads INFO, names nodes. */
interface ModeParts {
  readyEvent: 'ready' | 'connect';
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
    onError: (listener) => void client.on('error', listener),
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
    ping: async () => void (await client.sendCommand(['PING'])),
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
function cluster(parsed: StoreUrl, socket: SocketPolicy, scripts: readonly ClientScript[]) {
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
    // Every master: a cluster with one master lost is a store that is (partly) down.
    ping: async () => {
      await Promise.all(
        client.masters.map(async (master) => {
          const node = await client.nodeClient(master);
          await node.sendCommand(['PING']);
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
    ping: async () => void (await client.sendCommand(false, ['PING'])),
    info: () => client.sendCommand(false, ['INFO', 'server']),
    nodes: () => {
      const primary = client.getMasterNode();
      return primary === undefined ? [] : [`${primary.host}:${primary.port}`];
    },
  });
}
