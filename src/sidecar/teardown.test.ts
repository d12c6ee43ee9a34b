import { describe, expect, it } from 'vitest';
import { Teardown } from './teardown.js';

describe('Teardown', () => {
  it('runs the steps last first, each once, and a failing step does not stop the rest', async () => {
    const ran: string[] = [];
    const teardown = new Teardown();
    teardown.push(() => ran.push('opened first'));
    teardown.push(() => {
      ran.push('throws');
      throw new Error('no');
    });
    teardown.push(async () => {
      await Promise.resolve();
      ran.push('rejects');
      throw new Error('no either');
    });
    teardown.push(() => ran.push('opened last'));
    await teardown.run();
    expect(ran).toEqual(['opened last', 'rejects', 'throws', 'opened first']);
    await teardown.run();
    expect(ran).toHaveLength(4);
  });

  it('waits for each step before the next', async () => {
    const ran: string[] = [];
    const teardown = new Teardown();
    teardown.push(() => ran.push('second'));
    let release!: () => void;
    const slow = new Promise<void>((resolve) => (release = resolve));
    teardown.push(async () => {
      await slow;
      ran.push('first');
    });
    const done = teardown.run();
    await Promise.resolve();
    expect(ran).toEqual([]);
    release();
    await done;
    expect(ran).toEqual(['first', 'second']);
  });
});
