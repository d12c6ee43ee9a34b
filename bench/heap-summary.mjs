// Summary of a bench/heap-sample.cjs profile: bytes allocated per function (self), largest first;
// with a request count, bytes per request too.
//
//   node bench/heap-summary.mjs heap-<pid>.json [rows=40] [requests]
import { readFileSync } from 'node:fs';

const [file, rowsArg = '40', requestsArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: node bench/heap-summary.mjs heap-<pid>.json [rows] [requests]');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8'));
const self = new Map();
let total = 0;
const stack = [profile.head];
while (stack.length > 0) {
  const node = stack.pop();
  const f = node.callFrame;
  const key = `${f.functionName || '(anonymous)'} ${f.url.replace(/.*\//, '')}:${f.lineNumber + 1}`;
  self.set(key, (self.get(key) ?? 0) + node.selfSize);
  total += node.selfSize;
  stack.push(...node.children);
}
const requests = Number(requestsArg);
const perRequest = (bytes) =>
  requests > 0 ? `${(bytes / requests).toFixed(0).padStart(6)} B/req` : '';
console.log(`allocated ${(total / 1e6).toFixed(1)} MB ${perRequest(total)}`);
for (const [key, bytes] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(rowsArg))) {
  console.log(
    `${((100 * bytes) / total).toFixed(1).padStart(5)}% ${(bytes / 1e6).toFixed(2).padStart(8)} MB ${perRequest(bytes)}  ${key}`,
  );
}
