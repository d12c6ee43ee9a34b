import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { freePorts } from '../bench/lib.mjs';
import { roundOrder } from '../bench/order.mjs';

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
    const restart = loop.indexOf('await warmUp([t], agent, WARM_UP);');
    const windowEnd = loop.indexOf('const cpuMs = ');
    expect(restart).toBeGreaterThan(0);
    expect(windowEnd).toBeGreaterThan(restart);
    const between = loop.slice(restart, windowEnd);
    expect(between).toContain('await wrk(');
    // Only the window's own load: no scrape, no admin request, no other await on the target.
    expect(between.match(/await /g)).toHaveLength(2);
  });
});
