/**
 * config/oauth-sidecar.schema.json, the JSON Schema an editor (yaml-language-server) or a
 * platform team's CI checks the --config YAML against: it is what src/config/json-schema.ts makes
 * from FIELDS today, every shipped YAML names it and validates, and a typo is refused by the
 * schema as by the sidecar. Validated with Ajv (the field standard for JSON Schema in JavaScript,
 * a dev dependency), which also checks the schema itself against draft 2020-12's meta-schema.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { SCHEMA_FILE, configJsonSchemaText } from '../src/config/json-schema.js';
import { loadConfig } from '../src/config/load.js';

const ROOT = join(import.meta.dirname, '..');
const committed = readFileSync(join(ROOT, SCHEMA_FILE), 'utf8');
const validate = new Ajv2020({ allErrors: true, strict: true }).compile(JSON.parse(committed));
const SHIPPED = readdirSync(join(ROOT, 'config'))
  .filter((name) => name.endsWith('.yaml'))
  .map((name) => join('config', name));

const problems = (value: unknown): string[] =>
  validate(value)
    ? []
    : (validate.errors ?? []).map(
        (e) => `${e.instancePath} ${e.message ?? ''} ${JSON.stringify(e.params)}`,
      );

describe(SCHEMA_FILE, () => {
  it('is what scripts/config-schema.mjs makes from src/config/schema.ts today', () => {
    expect(committed).toBe(configJsonSchemaText());
  });

  it.each(SHIPPED)('%s names it on its first line and validates against it', (file) => {
    const text = readFileSync(join(ROOT, file), 'utf8');
    expect(text.split('\n')[0]).toBe('# yaml-language-server: $schema=./oauth-sidecar.schema.json');
    expect(problems(parse(text))).toEqual([]);
  });

  it('refuses a typo in a key, as the sidecar does', async () => {
    const typo = { upstream: { baseUrl: 'https://api.example.com', timeoutMS: 5000 } };
    expect(problems(typo).join('\n')).toContain('additionalProperty');
    const file = join(ROOT, 'config', 'laptop.yaml');
    const read = (path: string): Promise<string> =>
      Promise.resolve(
        path === file ? 'upstream:\n  baseUrl: https://api.example.com\n  timeoutMS: 5000\n' : '',
      );
    await expect(loadConfig({ env: {}, configFile: file, readFile: read })).rejects.toThrow(
      /upstream\.timeoutMS: unknown key/,
    );
  });

  it('refuses a value of the wrong kind and accepts the older key names', () => {
    expect(problems({ upstream: { timeoutMs: 'soon' } })).not.toEqual([]);
    expect(problems({ log: { level: 'loud' } })).not.toEqual([]);
    expect(problems({ proxy: { listen: '127.0.0.1:8080', maxInFlight: 0 } })).not.toEqual([]);
    expect(problems({ token: { store: { url: 'redis://127.0.0.1:6379' } } })).toEqual([]);
    expect(
      problems({ cache: { rules: [{ prefix: '/v1.0/contracts/', ttlSeconds: 300 }] } }),
    ).toEqual([]);
    expect(problems({ cache: { rules: [{ prefix: '/v1.0/', ttl: 300 }] } })).not.toEqual([]);
  });
});

describe(`${SCHEMA_FILE}: callers`, () => {
  const CALLERS_YAML = [
    'callers:',
    '  auth: jwt',
    '  jwt:',
    '    issuer: https://kubernetes.default.svc.cluster.local',
    '    audience: oauth-sidecar',
    '    caFile: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt',
    '    bearerFile: /var/run/secrets/kubernetes.io/serviceaccount/token',
    '  rules:',
    '    - subject: "system:serviceaccount:research:*"',
    '      caller: research',
    '    - subject: system:serviceaccount:ops:reports',
    '      caller: reports-ui',
    '      methods: [GET, HEAD]',
    '      paths: [/v1.0/contracts/]',
    '    - subject: system:serviceaccount:ops:batch',
    '      caller: nightly',
    "      methods: '*'",
    '    - system:serviceaccount:ops:cli=cli GET|HEAD /v1.0/',
  ].join('\n');

  it('a callers block with auth, jwt and rules validates, and the sidecar takes it', async () => {
    const value = parse(CALLERS_YAML) as { callers: { rules: unknown[] } };
    expect(problems(value)).toEqual([]);
    expect(problems({ callers: { rules: 'a=b;c*=d GET' } })).toEqual([]);
    const file = '/etc/oauth-sidecar/callers.yaml';
    // Offline, as a configuration CI checks it: the mounted CA and token files are not there.
    const absent = Object.assign(new Error('absent'), { code: 'ENOENT' });
    const read = (path: string): Promise<string> =>
      path === file
        ? Promise.resolve(`upstream:\n  baseUrl: https://api.example.com\n${CALLERS_YAML}\n`)
        : Promise.reject(absent);
    const notChecked: string[] = [];
    const config = await loadConfig({
      env: { CLIENT_ID: 'id', CLIENT_SECRET: 'secret' },
      configFile: file,
      readFile: read,
      strictness: { kind: 'offline-check', note: (line) => void notChecked.push(line) },
    });
    expect(notChecked).toHaveLength(1);
    expect(config.callers).toMatchObject({ auth: 'jwt', rules: expect.any(Array) });
    expect(config.callers.auth === 'jwt' && config.callers.rules).toHaveLength(4);
  });

  it('refuses a rule of the wrong type or shape, as the sidecar does', () => {
    const rules = (value: unknown): string[] => problems({ callers: { rules: value } });
    expect(rules(5)).not.toEqual([]);
    expect(rules({ subject: 'a', caller: 'b' })).not.toEqual([]);
    expect(rules([5])).not.toEqual([]);
    expect(rules([{ subject: 'a' }])).not.toEqual([]);
    expect(rules([{ subject: 'a', caller: 'b', paths: '/v1.0/' }])).not.toEqual([]);
    expect(rules([{ subject: 'a', caller: 'b', paths: ['v1.0/'] }])).not.toEqual([]);
    expect(rules([{ subject: 'a', caller: 'b', methods: 7 }])).not.toEqual([]);
    expect(rules([{ subject: 'a', caller: 'b', method: 'GET' }])).not.toEqual([]);
    expect(rules([{ subject: 'a b', caller: 'b' }])).not.toEqual([]);
    expect(problems({ callers: { auth: 'maybe' } })).not.toEqual([]);
    expect(problems({ callers: { jwt: { issuer: 5 } } })).not.toEqual([]);
  });
});
