import { describe, expect, it, vi } from 'vitest';
import type { SharedCooldown, SharedQuota } from '../../fleet/ports.js';
import { pollWhileDown } from './cooldown-source.js';

function fakeShared(up: boolean) {
  const cooldown: SharedCooldown = { status: 429, msLeft: 1_000 };
  const state = { up };
  const shared: SharedQuota = {
    take: vi.fn(() => Promise.resolve({ grants: [], tokens: 0, cooldown: undefined }) as never),
    startCooldown: vi.fn(() => Promise.resolve()),
    readCooldown: vi.fn(() => Promise.resolve(cooldown)),
    health: () => ({ up: state.up, connecting: false, lastError: null }),
  };
  return { shared, state, cooldown };
}

describe('pollWhileDown', () => {
  it('does not read the store while it is up: the next admission reads the cooldown', async () => {
    const { shared } = fakeShared(true);
    expect(await pollWhileDown(shared).readCooldown()).toBeUndefined();
    expect(shared.readCooldown).not.toHaveBeenCalled();
  });

  it('reads the store while it is not up (and so finds it back)', async () => {
    const { shared, state, cooldown } = fakeShared(false);
    const polled = pollWhileDown(shared);
    expect(await polled.readCooldown()).toBe(cooldown);
    expect(shared.readCooldown).toHaveBeenCalledTimes(1);
    state.up = true;
    expect(await polled.readCooldown()).toBeUndefined();
    expect(shared.readCooldown).toHaveBeenCalledTimes(1);
  });

  it('passes take, startCooldown and health through unchanged', async () => {
    const { shared } = fakeShared(false);
    const polled = pollWhileDown(shared);
    await polled.take([]);
    await polled.startCooldown(429, 5_000);
    expect(shared.take).toHaveBeenCalledWith([]);
    expect(shared.startCooldown).toHaveBeenCalledWith(429, 5_000);
    expect(polled.health()).toEqual({ up: false, connecting: false, lastError: null });
  });
});
