/**
 * Where a member under a rate limit learns of a fleet cooldown (docs/capacity.md "What moved the
 * wall, and what is left"): every request it sends upstream while the store is up is admitted by a store decision
 * (`take`), and that script reads the cooldown in the same atomic step before it grants a slot. The
 * 250 ms poll would add four reads a second per member on the quota's one shard, idle or not, and
 * tell nothing the next admission does not. So under a rate limit the poll reads the store only
 * while it is not up (it is then also what finds the store back); without one it reads every time.
 */
import type { SharedQuota } from '../../fleet/ports.js';

/** `shared` as the fleet link's poll sees it: under a rate limit, a read only while the store is not up. */
export function pollWhileDown(shared: SharedQuota): SharedQuota {
  return {
    take: (demands) => shared.take(demands),
    startCooldown: (status, ms) => shared.startCooldown(status, ms),
    readCooldown: () => (shared.health().up ? Promise.resolve(undefined) : shared.readCooldown()),
    health: () => shared.health(),
  };
}
