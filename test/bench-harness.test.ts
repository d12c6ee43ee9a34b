import { describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts } from '../bench/lib.mjs';
import { roundOrder } from '../bench/order.mjs';
import { needsStandin } from '../bench/targets.mjs';
import { measureWindows } from '../bench/windows.mjs';
import { closed, exitOf } from './helpers/command.js';

/** How often each target runs in each place of a round, over `rounds` rounds. */
function places(targets: string[], rounds: number): Map<string, number[]> {
  const counts = new Map(targets.map((t) => [t, targets.map(() => 0)]));
  for (let r = 0; r < rounds; r++) {
    roundOrder(targets, r).forEach((t, place) => (counts.get(t)![place]! += 1));
  }
  return counts;
}

describe('bench round order', () => {
  it('gives two targets each place in every other round (a pair is not biased by its slot)', () => {
    const firsts = Array.from({ length: 8 }, (_, r) => roundOrder(['a', 'b'], r)[0]);
    expect(firsts).toEqual(['a', 'b', 'b', 'a', 'a', 'b', 'b', 'a']);
    expect(places(['a', 'b'], 60)).toEqual(
      new Map([
        ['a', [30, 30]],
        ['b', [30, 30]],
      ]),
    );
  });

  it('puts each of n targets in each place equally often over 2n rounds, every permutation of three', () => {
    for (const targets of [['a'], ['a', 'b', 'c'], ['a', 'b', 'c', 'd', 'e']]) {
      const n = targets.length;
      for (const counts of places(targets, 2 * n).values())
        expect(counts).toEqual(targets.map(() => 2));
    }
    const orders = new Set(
      Array.from({ length: 6 }, (_, r) => roundOrder(['a', 'b', 'c'], r).join('')),
    );
    expect(orders.size).toBe(6);
  });

  it('leaves the targets list as it was', () => {
    const targets = ['a', 'b', 'c'];
    roundOrder(targets, 1);
    expect(targets).toEqual(['a', 'b', 'c']);
  });
});

describe('bench targets', () => {
  it('starts the stand-in for every sidecar target, alone too (sidecar-bearer alone found none)', () => {
    const source = readFileSync(new URL('../bench/run.mjs', import.meta.url), 'utf8');
    const listed = /--targets ([a-z0-9,-]+)\]/.exec(source)![1]!.split(',');
    const sidecars = listed.filter((name) => name.startsWith('sidecar'));
    expect(sidecars).toContain('sidecar-bearer');
    for (const name of sidecars) expect(needsStandin([name], { footprint: false })).toBe(true);
    expect(needsStandin(['nginx', 'floor'], { footprint: false })).toBe(false);
    expect(needsStandin(['nginx'], { footprint: true })).toBe(true);
  });
});

describe('bench free ports', () => {
  it('gives distinct ports that are free to bind (a sidecar needs two at once)', async () => {
    const ports = await freePorts(20);
    expect(new Set(ports).size).toBe(20);
    const servers = ports.map(() => createServer());
    await Promise.all(
      servers.map(
        (server, i) =>
          new Promise<void>((resolve, reject) => {
            server.once('error', reject);
            server.listen(ports[i], '127.0.0.1', resolve);
          }),
      ),
    );
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  });
});

describe('bench measured windows', () => {
  it('no request reaches a target between its warm-up and the end of its window (a /metrics scrape there made the window dearer)', () => {
    const source = readFileSync(new URL('../bench/run.mjs', import.meta.url), 'utf8');
    const loop = source.slice(source.indexOf('async function runRounds'));
    const restart = loop.indexOf('await warmUp(anew, agent, WARM_UP, args.together);');
    const windowEnd = loop.indexOf('together: args.together,', restart);
    expect(restart).toBeGreaterThan(0);
    expect(windowEnd).toBeGreaterThan(restart);
    const between = loop.slice(restart, windowEnd);
    expect(between).toContain('load: (t) => wrk(');
    // Only the window's own load: no scrape, no admin request, no other await on the target.
    expect(between.match(/await /g)).toHaveLength(2);
  });

  /** Loads that end when the test says, and a log of what happened in which order. */
  function scripted() {
    const events: string[] = [];
    const ends = new Map<string, () => void>();
    let ticks = 0;
    const parts = {
      cpu: (t: string) => {
        events.push(`cpu ${t}`);
        return (ticks += 10);
      },
      load: (t: string) => {
        events.push(`load ${t}`);
        return new Promise<string>((resolve) => ends.set(t, () => resolve(`result ${t}`)));
      },
    };
    const end = (t: string) => ends.get(t)!();
    return { events, parts, end };
  }

  it('one after another: a target reads its CPU, runs its load and reads again before the next starts', async () => {
    const { events, parts, end } = scripted();
    const measured = measureWindows(['a', 'b'], parts);
    end('a');
    await new Promise((resolve) => setImmediate(resolve));
    expect(events).toEqual(['cpu a', 'load a', 'cpu a', 'cpu b', 'load b']);
    end('b');
    expect(await measured).toEqual([
      { result: 'result a', cpu: 10 },
      { result: 'result b', cpu: 10 },
    ]);
  });

  it('together: every load starts before any ends, and each target is charged its own window', async () => {
    const { events, parts, end } = scripted();
    const measured = measureWindows(['a', 'b'], { ...parts, together: true });
    expect(events).toEqual(['cpu a', 'load a', 'cpu b', 'load b']);
    end('b');
    await new Promise((resolve) => setImmediate(resolve));
    end('a');
    // a: read at 10, again at 40 (after b's second reading, 30); b: 20 and 30.
    expect(await measured).toEqual([
      { result: 'result a', cpu: 30 },
      { result: 'result b', cpu: 10 },
    ]);
    expect(events).toEqual(['cpu a', 'load a', 'cpu b', 'load b', 'cpu b', 'cpu a']);
  });
});

describe('bench run interrupted', () => {
  it('stops what it started and removes its work folder on SIGINT, exit 130 (Ctrl-C no longer leaves sidecars serving)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-sigint-'));
    const work = join(dir, 'work');
    const script = join(dir, 'script.mjs');
    const lib = new URL('../bench/lib.mjs', import.meta.url).href;
    writeFileSync(
      script,
      [
        `import { mkdirSync, writeFileSync } from 'node:fs';`,
        `import { runScript } from ${JSON.stringify(lib)};`,
        `mkdirSync(${JSON.stringify(work)});`,
        `const cleanups = [() => writeFileSync(${JSON.stringify(join(dir, 'cleaned'))}, 'yes')];`,
        `await runScript('sigint', async () => {`,
        `  process.stdout.write('ready\\n');`,
        `  await new Promise(() => setInterval(() => {}, 1000));`,
        `}, { cleanups, work: ${JSON.stringify(work)}, keep: false });`,
      ].join('\n'),
    );
    try {
      const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
      const ended = closed(child);
      const ready = new Promise<void>((resolve) =>
        child.stdout.on('data', (d: Buffer) => {
          if (d.toString().includes('ready')) resolve();
        }),
      );
      // A script that dies before it is ready fails here, with its exit, not at the time-out.
      await Promise.race([
        ready,
        ended.then((e) => Promise.reject(new Error(`exited ${exitOf(e)}`))),
      ]);
      child.kill('SIGINT');
      expect(exitOf(await ended)).toBe(130);
      expect(readFileSync(join(dir, 'cleaned'), 'utf8')).toBe('yes');
      expect(existsSync(work)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
