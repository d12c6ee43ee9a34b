// How a bench round measures its targets' windows, kept apart from run.mjs so that a test can
// hold it.

/**
 * Each target's window: its process's CPU reading, its load, its CPU reading again. One target
 * after another, each with the proxy CPU to itself; or `together`: every target's load started
 * in the same turn, every proxy sharing the proxy CPU, so that noise which comes and goes within
 * seconds (another tenant's burst on the host) lands on every target of the round alike.
 * Per target, in order: the load's result and the CPU its process used over its own window.
 */
export async function measureWindows(targets, { cpu, load, together = false }) {
  const window = async (target) => {
    const before = cpu(target);
    const result = await load(target);
    return { result, cpu: cpu(target) - before };
  };
  if (together) return Promise.all(targets.map(window));
  const windows = [];
  for (const target of targets) windows.push(await window(target));
  return windows;
}
