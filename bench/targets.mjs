// Which shared processes a bench run starts for the targets it was given, kept apart from run.mjs
// so that a test can hold it.

/**
 * True when a run needs the stand-in token endpoint: every sidecar target gets its token there
 * (`sidecar-alt` runs beside `sidecar` or any other of them), and so does the footprint's sidecar.
 */
export function needsStandin(targets, { footprint }) {
  return footprint || targets.some((name) => name.startsWith('sidecar'));
}
