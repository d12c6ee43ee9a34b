/**
 * A real Redis Cluster and a real Sentinel setup from Debian's `redis-server` 7.0, on free loopback
 * ports, for the tests of `STORE_MODE=cluster` and `sentinel`: nodes started with
 * `--cluster-enabled yes` and joined by `redis-cli --cluster create`; a primary, its replica and
 * three `redis-server FILE --sentinel`. Short timeouts so a fail-over takes seconds. No persistence.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Fatal } from './wait.js';
import {
  freePorts,
  missingRedisServer,
  onFreshPorts,
  redisServerArgs,
  send,
  spawnRedisServer,
  waitUntilUp as until,
  type RedisProcess as Proc,
} from './redis-server.js';

export const REDIS_CLI_BIN = process.env.REDIS_CLI_BIN ?? 'redis-cli';

function killAll(procs: Iterable<Proc>): Promise<void> {
  return Promise.all(
    [...procs].map(async ({ child }) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }),
  ).then(() => undefined);
}

/** `field:value` of an INFO reply. */
function infoField(info: string, field: string): string | undefined {
  return new RegExp(`^${field}:(.*)$`, 'm').exec(info)?.[1]?.trim();
}

export interface RedisCluster {
  /** `redis://` naming two seed nodes (one reachable seed is enough). */
  readonly url: string;
  readonly ports: readonly number[];
  /** Ports of the nodes that are masters now (asked of a live node). */
  masters(): Promise<number[]>;
  /** Keys held by each master now, by port. */
  keysByMaster(): Promise<Map<number, number>>;
  /** SIGKILL one node. */
  kill(port: number): Promise<void>;
  /** Start a killed node again on its port, with its `nodes.conf`: it rejoins as it was. */
  restart(port: number): Promise<void>;
  /** Every slot served by a live master again (`cluster_state:ok` on every live node). */
  waitHealthy(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** `masters` masters with `replicas` replicas each; `cluster-node-timeout` 1000 ms. */
export async function startRedisCluster(
  options: { masters?: number; replicas?: number } = {},
): Promise<RedisCluster> {
  return onFreshPorts(() => startRedisClusterOnce(options), NodeExited);
}

/** A cluster node's redis-server exited before it answered (its output says why); ends the wait. */
class NodeExited extends Fatal {}

async function startRedisClusterOnce(
  options: { masters?: number; replicas?: number } = {},
): Promise<RedisCluster> {
  const missing = missingRedisServer();
  if (missing !== undefined) throw new Error(missing);
  const count = (options.masters ?? 3) * (1 + (options.replicas ?? 0));
  const dir = mkdtempSync(join(tmpdir(), 'oauth-sidecar-cluster-'));
  const procs = new Map<number, Proc>();
  const argsByPort = new Map<number, string[]>();
  const free = await freePorts(count * 2);
  for (let i = 0; i < count; i++) {
    const [port, bus] = [free[2 * i]!, free[2 * i + 1]!];
    const nodeDir = join(dir, String(port));
    mkdirSync(nodeDir);
    // Debian's redis-server reads the bus port from --cluster-port (Redis 7).
    const args = redisServerArgs(port, nodeDir, ['--cluster-port', String(bus)]);
    args.push('--cluster-enabled', 'yes', '--cluster-config-file', join(nodeDir, 'nodes.conf'));
    args.push('--cluster-node-timeout', '1000');
    // A replica fails over however long it has been out of touch with its master: on a loaded
    // machine a 1 s node timeout times 10 can pass before the master is killed.
    args.push('--cluster-replica-validity-factor', '0');
    procs.set(port, spawnRedisServer(args));
    argsByPort.set(port, args);
  }
  const ports = [...procs.keys()];
  const closeAll = async () => {
    await killAll(procs.values());
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports) {
      await until(`cluster node ${port}`, async () => {
        const node = procs.get(port)!;
        if (node.child.exitCode !== null) {
          throw new NodeExited(`cluster node ${port} exited: ${node.output}`);
        }
        return (await send(port, ['PING'])).includes('PONG');
      });
    }
    const create = spawnSync(
      REDIS_CLI_BIN,
      [
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        String(options.replicas ?? 0),
        '--cluster-yes',
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (create.error !== undefined) {
      throw new Error(
        `${REDIS_CLI_BIN} could not be run (${create.error.message}): apt-get install redis-tools, or set REDIS_CLI_BIN`,
      );
    }
    if (create.status !== 0)
      throw new Error(`redis-cli --cluster create:\n${create.stdout}${create.stderr}`);
  } catch (error) {
    await closeAll();
    throw error;
  }
  const live = () =>
    ports.filter(
      (p) => procs.get(p)!.child.exitCode === null && procs.get(p)!.child.signalCode === null,
    );
  const cluster: RedisCluster = {
    url: `redis://127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}`,
    ports,
    async masters() {
      const out: number[] = [];
      for (const port of live()) {
        const role = await send(port, ['ROLE']);
        if (role.includes('master')) out.push(port);
      }
      return out;
    },
    async keysByMaster() {
      const out = new Map<number, number>();
      for (const port of await cluster.masters()) {
        out.set(port, Number(/:(\d+)/.exec(await send(port, ['DBSIZE']))?.[1] ?? 0));
      }
      return out;
    },
    async kill(port) {
      await killAll([procs.get(port)!]);
    },
    async restart(port) {
      procs.set(port, spawnRedisServer(argsByPort.get(port)!));
      await until(`cluster node ${port} again`, async () =>
        (await send(port, ['PING'])).includes('PONG'),
      );
    },
    async waitHealthy(timeoutMs = 30_000) {
      await until(
        'cluster_state:ok on every live node',
        async () => {
          for (const port of live()) {
            const info = await send(port, ['CLUSTER', 'INFO']);
            if (infoField(info, 'cluster_state') !== 'ok') return false;
            if (infoField(info, 'cluster_slots_fail') !== '0') return false;
          }
          // Replicas of a master that is gone report ok before the promotion is known to all.
          return (await cluster.masters()).length >= (options.masters ?? 3);
        },
        timeoutMs,
      );
    },
    close: closeAll,
  };
  await cluster.waitHealthy();
  return cluster;
}

export interface RedisSentinels {
  /** `redis://` naming the three sentinels. */
  readonly url: string;
  readonly primaryName: string;
  /** The port the sentinels name as the primary now. */
  primary(): Promise<number>;
  kill(port: number): Promise<void>;
  close(): Promise<void>;
}

/** A sidecar's store settings for `sentinels`: Sentinel mode, the three sentinels, the primary's name. */
export function sentinelEnv(sentinels: Pick<RedisSentinels, 'url' | 'primaryName'>): {
  STORE_MODE: 'sentinel';
  STORE_URL: string;
  STORE_SENTINEL_PRIMARY: string;
} {
  return {
    STORE_MODE: 'sentinel',
    STORE_URL: sentinels.url,
    STORE_SENTINEL_PRIMARY: sentinels.primaryName,
  };
}

/**
 * A primary, one replica and three sentinels (quorum 2, down-after 1000 ms). With
 * `sentinelPassword` the sentinels require it (`requirepass`, and `sentinel sentinel-pass` among
 * themselves); the data nodes have none.
 */
export async function startRedisSentinels(
  options: { sentinelPassword?: string } = {},
): Promise<RedisSentinels> {
  return onFreshPorts(() => startRedisSentinelsOnce(options), NodeExited);
}

/** Throws {@link NodeExited} when one of `procs` has exited (its output says why). */
function expectAlive(procs: readonly Proc[]): void {
  const exited = procs.find((p) => p.child.exitCode !== null);
  if (exited !== undefined) {
    throw new NodeExited(`redis-server on ${exited.port} exited: ${exited.output}`);
  }
}

async function startRedisSentinelsOnce(
  options: { sentinelPassword?: string } = {},
): Promise<RedisSentinels> {
  const auth = options.sentinelPassword;
  const missing = missingRedisServer();
  if (missing !== undefined) throw new Error(missing);
  const dir = mkdtempSync(join(tmpdir(), 'oauth-sidecar-sentinel-'));
  const procs: Proc[] = [];
  const name = 'mymaster';
  const data = (port: number, extra: string[] = []) =>
    spawnRedisServer(redisServerArgs(port, dir, extra));
  const closeAll = async () => {
    await killAll(procs);
    rmSync(dir, { recursive: true, force: true });
  };
  const [primaryPort = 0, replicaPort = 0, ...sentinelFree] = await freePorts(5);
  procs.push(data(primaryPort));
  procs.push(data(replicaPort, ['--replicaof', '127.0.0.1', String(primaryPort)]));
  const sentinelPorts: number[] = [];
  try {
    await until('the replica in sync', async () => {
      expectAlive(procs);
      return (
        infoField(await send(replicaPort, ['INFO', 'replication']), 'master_link_status') === 'up'
      );
    });
    for (let i = 0; i < 3; i++) {
      const port = sentinelFree[i]!;
      const file = join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${name} 127.0.0.1 ${primaryPort} 2`,
          `sentinel down-after-milliseconds ${name} 1000`,
          `sentinel failover-timeout ${name} 5000`,
          `sentinel parallel-syncs ${name} 1`,
          ...(auth === undefined ? [] : [`requirepass ${auth}`, `sentinel sentinel-pass ${auth}`]),
          '',
        ].join('\n'),
      );
      procs.push(spawnRedisServer([file, '--sentinel'], port));
      sentinelPorts.push(port);
    }
    // Sentinels find each other by hello messages every 2 s and the replica by the primary's
    // INFO every 10 s: 60 s is a limit for a hang.
    for (const port of sentinelPorts) {
      await until(
        `sentinel ${port} to see the replica and the other sentinels`,
        async () => {
          expectAlive(procs);
          const reply = await send(port, ['SENTINEL', 'MASTER', name], auth);
          const fields = reply.split('\r\n');
          const value = (key: string) => fields[fields.indexOf(key) + 2];
          return value('num-slaves') === '1' && value('num-other-sentinels') === '2';
        },
        60_000,
      );
    }
  } catch (error) {
    await closeAll();
    throw error;
  }
  return {
    url: `redis://${sentinelPorts.map((p) => `127.0.0.1:${p}`).join(',')}`,
    primaryName: name,
    async primary() {
      for (const port of sentinelPorts) {
        try {
          const reply = await send(port, ['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name], auth);
          const found = /\r\n(\d+)\r\n$/.exec(reply);
          if (found !== null) return Number(found[1]);
        } catch {
          // that sentinel is not answering: ask the next
        }
      }
      throw new Error('no sentinel names a primary');
    },
    async kill(port) {
      await killAll(procs.filter((p) => p.port === port));
    },
    close: closeAll,
  };
}

export interface ClusterAndSentinels {
  readonly cluster: RedisCluster;
  readonly sentinels: RedisSentinels;
  close(): Promise<void>;
}

/**
 * A Redis Cluster and a Sentinel setup started side by side (a file's `beforeAll`: each start is
 * mostly waiting on the servers). When one fails to start, the other is closed and that error thrown.
 */
export async function startClusterAndSentinels(
  options: {
    cluster?: Parameters<typeof startRedisCluster>[0];
    sentinels?: Parameters<typeof startRedisSentinels>[0];
  } = {},
): Promise<ClusterAndSentinels> {
  const [cluster, sentinels] = await Promise.allSettled([
    startRedisCluster(options.cluster),
    startRedisSentinels(options.sentinels),
  ]);
  if (cluster.status === 'rejected' || sentinels.status === 'rejected') {
    if (cluster.status === 'fulfilled') await cluster.value.close();
    if (sentinels.status === 'fulfilled') await sentinels.value.close();
    throw cluster.status === 'rejected'
      ? cluster.reason
      : (sentinels as PromiseRejectedResult).reason;
  }
  return {
    cluster: cluster.value,
    sentinels: sentinels.value,
    close: async () => {
      await Promise.all([cluster.value.close(), sentinels.value.close()]);
    },
  };
}
