// Summarise a V8 CPU profile (node --cpu-prof): self and inclusive shares by function.
//   node bench/profile-summary.mjs CPU.*.cpuprofile [selfRows=30] [inclusiveRows=50]
// Used for docs/benchmarks.md: run the bench with
//   node bench/run.mjs --targets sidecar --rounds 1 "--sidecar-flags=--cpu-prof --cpu-prof-dir=DIR"
import { readFileSync } from 'node:fs';
const p = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const dt = new Map();
for (let i = 0; i < p.samples.length; i++)
  dt.set(p.samples[i], (dt.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
const total = [...dt.values()].reduce((a, b) => a + b, 0);
const self = new Map();
const parent = new Map();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const key = (n) =>
  `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.replace(/.*node_modules\//, '').replace(/.*\/dist\//, 'dist/')}:${n.callFrame.lineNumber}`;
for (const [id, t] of dt) {
  const k = key(byId.get(id));
  self.set(k, (self.get(k) ?? 0) + t);
}
// inclusive by key
const incl = new Map();
for (const [id, t] of dt) {
  const seen = new Set();
  let cur = id;
  while (cur !== undefined) {
    const k = key(byId.get(cur));
    if (!seen.has(k)) {
      seen.add(k);
      incl.set(k, (incl.get(k) ?? 0) + t);
    }
    cur = parent.get(cur);
  }
}
const top = (m, n) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, t]) => `${((100 * t) / total).toFixed(1).padStart(5)}%  ${k}`)
    .join('\n');
console.log('SELF\n' + top(self, Number(process.argv[3] ?? 30)));
console.log('\nINCLUSIVE\n' + top(incl, Number(process.argv[4] ?? 50)));
