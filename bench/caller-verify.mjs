// What a caller's token costs the sidecar with CALLER_AUTH=jwt (docs/benchmarks.md "Caller
// identity"), in this process, one core: a first verification (jose's jwtVerify of RS256, ES256
// and PS256 tokens against a key set whose keys are already imported: what a new token of a known
// key costs) and the key set's first use (createLocalJWKSet + import + verify: once per key per
// key set), beside the per-request cost of a remembered token (SHA-256 of the token and a lookup)
// and of the whole caller stage for it (dist/callers/stage.js: token, lookup, rule, metric), which
// is what CALLER_AUTH=jwt adds to a request whose caller reuses its token. Not part of `npm test`;
// needs `npm run build`.
//
//   node bench/caller-verify.mjs [--iterations N]
import { hash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { join } from 'node:path';
import { SignJWT, createLocalJWKSet, exportJWK, generateKeyPair, jwtVerify } from 'jose';

const { values: args } = parseArgs({
  options: { iterations: { type: 'string', default: '2000' } },
});
const N = Number(args.iterations);
const ISSUER = 'https://issuer.bench.invalid';
const OPTIONS = {
  algorithms: ['RS256', 'ES256', 'PS256'],
  issuer: ISSUER,
  audience: 'oauth-sidecar',
  requiredClaims: ['exp', 'sub'],
  clockTolerance: 30,
};

async function tokensFor(alg, count) {
  const { publicKey, privateKey } = await generateKeyPair(alg);
  const jwk = { ...(await exportJWK(publicKey)), kid: alg, alg };
  const tokens = [];
  for (let i = 0; i < count; i++) {
    tokens.push(
      await new SignJWT({ sub: `system:serviceaccount:bench:app-${i}` })
        .setProtectedHeader({ alg, kid: alg })
        .setIssuer(ISSUER)
        .setAudience('oauth-sidecar')
        .setIssuedAt()
        .setExpirationTime('1h')
        .sign(privateKey),
    );
  }
  return { jwks: { keys: [jwk] }, tokens };
}

/** Median µs per operation over 5 runs of `count` operations. */
async function timed(count, op) {
  const runs = [];
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    for (let i = 0; i < count; i++) await op(i);
    runs.push(((performance.now() - t0) * 1000) / count);
  }
  return runs.sort((a, b) => a - b)[2];
}

const rows = [];
for (const alg of ['RS256', 'ES256', 'PS256']) {
  const { jwks, tokens } = await tokensFor(alg, N);
  const held = createLocalJWKSet(jwks);
  await jwtVerify(tokens[0], held, OPTIONS); // the key imported once
  const verify = await timed(N, (i) => jwtVerify(tokens[i], held, OPTIONS));
  const firstUse = await timed(Math.min(N, 200), (i) =>
    jwtVerify(tokens[i], createLocalJWKSet(jwks), OPTIONS),
  );
  const remembered = new Map(tokens.map((t) => [hash('sha256', t, 'base64'), t]));
  const lookup = await timed(N, (i) => remembered.get(hash('sha256', tokens[i], 'base64')));
  rows.push({ alg, tokenBytes: tokens[0].length, verify, firstUse, lookup });
}

/** The caller stage as the sidecar runs it, for one remembered token of each algorithm. */
async function stageCost() {
  const dist = join(import.meta.dirname, '..', 'dist', 'callers');
  const { callerStage } = await import(join(dist, 'stage.js'));
  const { CallerVerifier } = await import(join(dist, 'verifier.js'));
  const { CallerRules } = await import(join(dist, 'rules.js'));
  const { jwks, tokens } = await tokensFor('RS256', 1);
  const verifier = new CallerVerifier({
    issuer: ISSUER,
    audience: 'oauth-sidecar',
    getKey: createLocalJWKSet(jwks),
    clock: { now: () => Date.now() },
  });
  const rules = new CallerRules([
    { subject: 'system:serviceaccount:other:', match: 'prefix', caller: 'other-app' },
    { subject: 'system:serviceaccount:bench:', match: 'prefix', caller: 'bench' },
  ]);
  const { createMetrics } = await import(join(dist, '..', 'telemetry', 'metrics.js'));
  const { createMetricsRegistry } = await import(join(dist, '..', 'telemetry', 'exposition.js'));
  const metrics = createMetrics({ registry: createMetricsRegistry(), defaultMetrics: false });
  const counts = metrics.callerAuth({ ageSeconds: () => 0 });
  const stage = callerStage({ verifier, rules, counts });
  const exchange = {
    req: { headers: { authorization: `Bearer ${tokens[0]}` } },
    method: 'GET',
    target: '/v1.0/contracts/',
  };
  await stage.beforeUpstream(exchange); // verified once, then remembered
  const count = N * 50;
  const runs = [];
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    for (let i = 0; i < count; i++) stage.beforeUpstream(exchange);
    runs.push(((performance.now() - t0) * 1000) / count);
  }
  return runs.sort((a, b) => a - b)[2];
}

const stage = await stageCost();
console.log(`node ${process.version}, ${N} tokens per algorithm, median of 5 runs`);
console.log(
  `caller stage, remembered RS256 token (token, SHA-256, lookup, rule, metric): ${stage.toFixed(2)} µs per request`,
);
console.log(
  '| alg | token bytes | jwtVerify, key imported (µs) | first use of the key set (µs) | remembered: SHA-256 + lookup (µs) |',
);
console.log('|---|---:|---:|---:|---:|');
for (const r of rows) {
  console.log(
    `| ${r.alg} | ${r.tokenBytes} | ${r.verify.toFixed(0)} | ${r.firstUse.toFixed(0)} | ${r.lookup.toFixed(2)} |`,
  );
}
