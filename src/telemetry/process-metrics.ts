/**
 * The process metrics prom-client's `collectDefaultMetrics` exports, read at scrape time through
 * public node APIs, under the same names, but for three: `nodejs_gc_duration_seconds` (its
 * PerformanceObserver costs CPU on every request under load, docs/benchmarks.md
 * "Consolidation"), and `nodejs_active_handles` / `nodejs_active_requests` (prom-client reads them
 * through node's private `process._getActive*`; `nodejs_active_resources` says the same publicly).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';
import { Counter, Gauge, type Registry, type RegistryContentType } from 'prom-client';

/** `/proc/self/status` fields in bytes (Linux); empty elsewhere. */
function procStatus(): Map<string, number> {
  const fields = new Map<string, number>();
  try {
    for (const line of readFileSync('/proc/self/status', 'utf8').split('\n')) {
      const match = /^(Vm\w+):\s+(\d+) kB/.exec(line);
      if (match) fields.set(match[1]!, Number(match[2]) * 1024);
    }
  } catch {
    // Not Linux: only what node reports.
  }
  return fields;
}

function maxFds(): number | undefined {
  try {
    const limits = readFileSync('/proc/self/limits', 'utf8');
    const match = /Max open files\s+(\d+)/.exec(limits);
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

function gauge(
  registers: Registry<RegistryContentType>[],
  name: string,
  help: string,
  collect: (g: Gauge) => void,
) {
  return new Gauge({
    name,
    help,
    registers,
    collect() {
      collect(this);
    },
  });
}

function registerCpu(registers: Registry<RegistryContentType>[], prefix: string): void {
  let last = process.cpuUsage();
  const user = new Counter({
    name: `${prefix}process_cpu_user_seconds_total`,
    help: 'Total user CPU time spent in seconds.',
    registers,
    collect() {
      const now = process.cpuUsage();
      const userSeconds = (now.user - last.user) / 1e6;
      const systemSeconds = (now.system - last.system) / 1e6;
      last = now;
      user.inc(userSeconds);
      system.inc(systemSeconds);
      total.inc(userSeconds + systemSeconds);
    },
  });
  const system = new Counter({
    name: `${prefix}process_cpu_system_seconds_total`,
    help: 'Total system CPU time spent in seconds.',
    registers,
  });
  const total = new Counter({
    name: `${prefix}process_cpu_seconds_total`,
    help: 'Total user and system CPU time spent in seconds.',
    registers,
  });
}

function registerMemory(registers: Registry<RegistryContentType>[], prefix: string): void {
  let status = new Map<string, number>();
  gauge(
    registers,
    `${prefix}process_resident_memory_bytes`,
    'Resident memory size in bytes.',
    (g) => {
      status = procStatus();
      g.set(status.get('VmRSS') ?? process.memoryUsage.rss());
    },
  );
  if (process.platform === 'linux') {
    gauge(
      registers,
      `${prefix}process_virtual_memory_bytes`,
      'Virtual memory size in bytes.',
      (g) => g.set(status.get('VmSize') ?? 0),
    );
    gauge(registers, `${prefix}process_heap_bytes`, 'Process heap size in bytes.', (g) =>
      g.set(status.get('VmData') ?? 0),
    );
  }
  const help = (what: string) => `Process heap ${what} from Node.js in bytes.`;
  gauge(registers, `${prefix}nodejs_heap_size_total_bytes`, help('size'), (g) =>
    g.set(process.memoryUsage().heapTotal),
  );
  gauge(registers, `${prefix}nodejs_heap_size_used_bytes`, help('size used'), (g) =>
    g.set(process.memoryUsage().heapUsed),
  );
  gauge(
    registers,
    `${prefix}nodejs_external_memory_bytes`,
    'Node.js external memory size in bytes.',
    (g) => g.set(process.memoryUsage().external),
  );
  for (const [suffix, field] of [
    ['size_total', 'space_size'],
    ['size_used', 'space_used_size'],
    ['size_available', 'space_available_size'],
  ] as const) {
    new Gauge({
      name: `${prefix}nodejs_heap_space_${suffix}_bytes`,
      help: `Process heap space ${suffix.replace('_', ' ')} from Node.js in bytes.`,
      labelNames: ['space'],
      registers,
      collect() {
        for (const space of getHeapSpaceStatistics()) {
          this.set({ space: space.space_name.replace(/_space$/, '') }, space[field]);
        }
      },
    });
  }
}

function registerEventLoop(registers: Registry<RegistryContentType>[], prefix: string): void {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const stats: [string, string, () => number][] = [
    ['lag_min', 'minimum', () => delay.min],
    ['lag_max', 'maximum', () => delay.max],
    ['lag_mean', 'mean', () => delay.mean],
    ['lag_stddev', 'standard deviation', () => delay.stddev],
    ['lag_p50', '50th percentile', () => delay.percentile(50)],
    ['lag_p90', '90th percentile', () => delay.percentile(90)],
    ['lag_p99', '99th percentile', () => delay.percentile(99)],
  ];
  for (const [name, what, read] of stats) {
    gauge(
      registers,
      `${prefix}nodejs_eventloop_${name}_seconds`,
      `The ${what} of the recorded event loop delays.`,
      (g) => g.set(read() / 1e9),
    );
  }
  gauge(
    registers,
    `${prefix}nodejs_eventloop_lag_seconds`,
    'Lag of event loop in seconds.',
    (g) => {
      const start = process.hrtime.bigint();
      setImmediate(() => g.set(Number(process.hrtime.bigint() - start) / 1e9));
    },
  );
}

function registerProcess(registers: Registry<RegistryContentType>[], prefix: string): void {
  const startedAt = Math.round(Date.now() / 1000 - process.uptime());
  gauge(
    registers,
    `${prefix}process_start_time_seconds`,
    'Start time of the process since unix epoch in seconds.',
    (g) => g.set(startedAt),
  );
  if (process.platform === 'linux') {
    gauge(registers, `${prefix}process_open_fds`, 'Number of open file descriptors.', (g) => {
      try {
        g.set(readdirSync('/proc/self/fd').length - 1);
      } catch {
        // A /proc that went away: the previous reading stays.
      }
    });
    const max = maxFds();
    if (max !== undefined) {
      gauge(
        registers,
        `${prefix}process_max_fds`,
        'Maximum number of open file descriptors.',
        (g) => g.set(max),
      );
    }
  }
  const [major, minor, patch] = process.versions.node.split('.');
  new Gauge({
    name: `${prefix}nodejs_version_info`,
    help: 'Node.js version info.',
    labelNames: ['version', 'major', 'minor', 'patch'],
    registers,
  }).set({ version: process.version, major, minor, patch }, 1);
  const resources = new Gauge({
    name: `${prefix}nodejs_active_resources`,
    help: 'Number of active resources that are currently keeping the event loop alive, grouped by async resource type.',
    labelNames: ['type'],
    registers,
    collect() {
      this.reset();
      const counts = new Map<string, number>();
      for (const type of process.getActiveResourcesInfo())
        counts.set(type, (counts.get(type) ?? 0) + 1);
      for (const [type, count] of counts) resources.set({ type }, count);
    },
  });
  gauge(
    registers,
    `${prefix}nodejs_active_resources_total`,
    'Total number of active resources.',
    (g) => g.set(process.getActiveResourcesInfo().length),
  );
}

/** The process metrics, on `registry`, each name under `prefix`. */
export function registerProcessMetrics(
  registry: Registry<RegistryContentType>,
  prefix: string,
): void {
  const registers = [registry];
  registerCpu(registers, prefix);
  registerMemory(registers, prefix);
  registerEventLoop(registers, prefix);
  registerProcess(registers, prefix);
}
