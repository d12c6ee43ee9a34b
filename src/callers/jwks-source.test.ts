import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MockAgent } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { oneReadAtATime, readTextFile } from '../config/credentials.js';
import type { CallerJwtConfig } from '../config/types.js';
import {
  discoveryUrl,
  fileSource,
  MAX_BEARER_FILE_BYTES,
  MAX_JWKS_BYTES,
  urlSource,
} from './jwks-source.js';

const ISSUER = 'https://issuer.example';
const KEYS = { keys: [{ kty: 'EC', kid: 'k1', crv: 'P-256', x: 'x', y: 'y' }] };
const BEARER = 'projected-sa-token';

let agent: MockAgent;
beforeEach(() => {
  agent = new MockAgent();
  agent.disableNetConnect();
});
afterEach(async () => {
  await agent.close();
});

/** The `authorization` header of a request the mock saw, whatever shape undici gave the headers. */
function authorizationOf(headers: unknown): string | undefined {
  if (Array.isArray(headers)) {
    for (let i = 0; i < headers.length; i += 2) {
      if (String(headers[i]).toLowerCase() === 'authorization') return String(headers[i + 1]);
    }
    return undefined;
  }
  const record = (headers ?? {}) as Record<string, string>;
  return record.authorization ?? record.Authorization;
}

/** Replies `body` (JSON) at `origin` + `path` once, recording the bearer presented. */
function serve(origin: string, path: string, body: unknown, status = 200) {
  const seen: (string | undefined)[] = [];
  agent
    .get(origin)
    .intercept({ path, method: 'GET' })
    .reply((opts) => {
      seen.push(authorizationOf(opts.headers));
      return { statusCode: status, data: typeof body === 'string' ? body : JSON.stringify(body) };
    });
  return seen;
}

/** The URL source; `bearerFile: null` configures none. */
function source(
  keys: CallerJwtConfig['keys'],
  bearerFile: string | null = '/var/run/token',
  reads: string[] = [],
) {
  return urlSource({
    jwt: { issuer: `${ISSUER}/`, keys, bearerFile: bearerFile ?? undefined },
    dispatcher: agent,
    readFile: (path, maxBytes) => {
      // A projected token is a few KiB: a bearer file is read with a bound of its own.
      expect(maxBytes).toBe(MAX_BEARER_FILE_BYTES);
      reads.push(path);
      return Promise.resolve(`${BEARER}\n`);
    },
  });
}

describe('discoveryUrl', () => {
  it('appends the well-known path to the issuer, without doubling its slash', () => {
    expect(discoveryUrl('https://a.example/realm//')).toBe(
      'https://a.example/realm/.well-known/openid-configuration',
    );
  });
});

describe('urlSource', () => {
  it('fetches a configured JWKS URL, presenting the bearer file re-read at each fetch', async () => {
    const reads: string[] = [];
    const jwks = source({ kind: 'url', url: 'https://keys.example/jwks' }, '/var/run/token', reads);
    expect(jwks.description).toBe('https://keys.example/jwks');
    const first = serve('https://keys.example', '/jwks', KEYS);
    const second = serve('https://keys.example', '/jwks', KEYS);
    expect(await jwks.fetch()).toEqual(KEYS);
    expect(await jwks.fetch()).toEqual(KEYS);
    expect([...first, ...second]).toEqual([`Bearer ${BEARER}`, `Bearer ${BEARER}`]);
    expect(reads).toEqual(['/var/run/token', '/var/run/token']);
  });

  it('says which bearer file could not be read, and asks nothing without it', async () => {
    const jwks = urlSource({
      jwt: {
        issuer: `${ISSUER}/`,
        keys: { kind: 'url', url: 'https://keys.example/jwks' },
        bearerFile: '/var/run/token',
      },
      dispatcher: agent,
      readFile: () => Promise.reject(new Error('is a FIFO (named pipe), not a regular file')),
    });
    await expect(jwks.fetch()).rejects.toThrow(
      '/var/run/token: cannot read (is a FIFO (named pipe), not a regular file)',
    );
  });

  it('sends no bearer when no bearer file is configured', async () => {
    const seen = serve('https://keys.example', '/jwks', KEYS);
    await source({ kind: 'url', url: 'https://keys.example/jwks' }, null).fetch();
    expect(seen).toEqual([undefined]);
  });

  it('finds the keys through discovery once, and presents the bearer only on the issuer origin', async () => {
    const jwks = source({ kind: 'discovery' });
    expect(jwks.description).toBe(`${ISSUER}/.well-known/openid-configuration`);
    const discovery = serve(ISSUER, '/.well-known/openid-configuration', {
      jwks_uri: 'https://cdn.example/keys',
    });
    const keys = serve('https://cdn.example', '/keys', KEYS);
    const again = serve('https://cdn.example', '/keys', KEYS);
    expect(await jwks.fetch()).toEqual(KEYS);
    expect(await jwks.fetch()).toEqual(KEYS);
    // The discovery document was asked once (a second ask would find no interceptor and fail).
    expect(discovery).toEqual([`Bearer ${BEARER}`]);
    // Another origin never sees the projected token.
    expect([...keys, ...again]).toEqual([undefined, undefined]);
  });

  it('asks the discovery document again after the keys could not be fetched', async () => {
    const jwks = source({ kind: 'discovery' });
    serve(ISSUER, '/.well-known/openid-configuration', { jwks_uri: `${ISSUER}/old-keys` });
    serve(ISSUER, '/old-keys', 'gone', 404);
    await expect(jwks.fetch()).rejects.toThrow(`${ISSUER}/old-keys: answered 404`);
    serve(ISSUER, '/.well-known/openid-configuration', { jwks_uri: `${ISSUER}/new-keys` });
    const seen = serve(ISSUER, '/new-keys', KEYS);
    expect(await jwks.fetch()).toEqual(KEYS);
    expect(seen).toEqual([`Bearer ${BEARER}`]);
  });

  it('refuses a discovery document without an https jwks_uri', async () => {
    serve(ISSUER, '/.well-known/openid-configuration', { jwks_uri: 'http://plain.example/keys' });
    await expect(source({ kind: 'discovery' }).fetch()).rejects.toThrow(
      /no https jwks_uri in the discovery document/,
    );
  });

  it('names the URL for an answer that is not JSON, too large, or a failed connection', async () => {
    const url = 'https://keys.example/jwks';
    const jwks = source({ kind: 'url', url });
    serve('https://keys.example', '/jwks', '<html>');
    await expect(jwks.fetch()).rejects.toThrow(`${url}: the answer is not JSON`);
    serve('https://keys.example', '/jwks', 'x'.repeat(MAX_JWKS_BYTES + 1));
    await expect(jwks.fetch()).rejects.toThrow(
      `${url}: answer larger than ${MAX_JWKS_BYTES} bytes`,
    );
    agent
      .get('https://keys.example')
      .intercept({ path: '/jwks', method: 'GET' })
      .replyWithError(new Error('ECONNRESET'));
    await expect(jwks.fetch()).rejects.toThrow(new RegExp(`^${url}: .*ECONNRESET`));
  });
});

describe('fileSource', () => {
  it('starts no second read of a file while the first still hangs', async () => {
    let finish: (text: string) => void = () => undefined;
    let reads = 0;
    const jwks = fileSource(
      '/etc/jwks.json',
      oneReadAtATime(() => {
        reads += 1;
        return new Promise<string>((resolve) => (finish = resolve));
      }),
    );
    const hung = jwks.fetch();
    await expect(jwks.fetch()).rejects.toThrow(
      '/etc/jwks.json: cannot read (its previous read has not finished (a hung mount?))',
    );
    expect(reads).toBe(1);
    finish(JSON.stringify(KEYS));
    expect(await hung).toEqual(KEYS);
    const next = jwks.fetch();
    finish(JSON.stringify(KEYS));
    expect(await next).toEqual(KEYS);
    expect(reads).toBe(2);
  });

  it('reads the file at each fetch, so a changed file is seen', async () => {
    let text = JSON.stringify(KEYS);
    const jwks = fileSource('/etc/jwks.json', () => Promise.resolve(text));
    expect(jwks.description).toBe('/etc/jwks.json');
    expect(await jwks.fetch()).toEqual(KEYS);
    text = JSON.stringify({ keys: [] });
    expect(await jwks.fetch()).toEqual({ keys: [] });
  });

  it('refuses a key file larger than an answer may be', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oauth-sidecar-jwks-'));
    try {
      const file = join(dir, 'jwks.json');
      const text = JSON.stringify(KEYS);
      await writeFile(file, text.padEnd(MAX_JWKS_BYTES));
      expect(await fileSource(file, readTextFile).fetch()).toEqual(KEYS);
      await writeFile(file, text.padEnd(MAX_JWKS_BYTES + 1));
      await expect(fileSource(file, readTextFile).fetch()).rejects.toThrow(
        `${file}: cannot read (is ${MAX_JWKS_BYTES + 1} bytes, more than the ${MAX_JWKS_BYTES} read)`,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('says which file could not be read or parsed', async () => {
    const missing = fileSource('/etc/jwks.json', () =>
      Promise.reject(Object.assign(new Error('ENOENT: no such file'), { code: 'ENOENT' })),
    );
    await expect(missing.fetch()).rejects.toThrow(/^\/etc\/jwks\.json: cannot read \(/);
    const garbled = fileSource('/etc/jwks.json', () => Promise.resolve('{not json'));
    await expect(garbled.fetch()).rejects.toThrow('/etc/jwks.json: not a JSON key set');
  });
});
