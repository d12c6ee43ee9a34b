// Allocation profile of a process under load: every allocation sampled (about one per 512 bytes),
// including objects the GC has since collected, so short-lived per-request garbage shows up
// (node's --heap-prof keeps only what is still alive). Loaded with --import; the profile is
// written to $HEAP_SAMPLE_DIR (default: the working directory, the repository root under the bench;
// .gitignore has heap-*.json) when the process exits.
//
//   node bench/run.mjs --targets sidecar --rounds 1 --duration 10 --only-2kb --no-footprint \
//     "--sidecar-flags=--import $PWD/bench/heap-sample.mjs"
//   node bench/heap-summary.mjs heap-<pid>.json [rows] [requests]
import fs from 'node:fs';
import inspector from 'node:inspector';
import path from 'node:path';
import process from 'node:process';

const session = new inspector.Session();
session.connect();
session.post('HeapProfiler.startSampling', {
  samplingInterval: 512,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
});
process.on('exit', () => {
  // In-process inspector sessions answer synchronously, so this runs before the process ends.
  session.post('HeapProfiler.stopSampling', (err, result) => {
    if (err) return;
    const dir = process.env.HEAP_SAMPLE_DIR ?? process.cwd();
    fs.writeFileSync(path.join(dir, `heap-${process.pid}.json`), JSON.stringify(result.profile));
  });
});
