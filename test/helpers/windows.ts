/**
 * The most events in any window of `windowMs` (times in ms, ascending): how the tests check the
 * keeper's rate ceiling of 10 token requests in any 10 s.
 */
export function busiestWindow(times: readonly number[], windowMs = 10_000): number {
  let most = 0;
  let start = 0;
  for (let end = 0; end < times.length; end++) {
    while (times[end]! - times[start]! >= windowMs) start += 1;
    most = Math.max(most, end - start + 1);
  }
  return most;
}
