import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, REDACT_PATHS, wantsColour } from './logger.js';

const SECRET = 's3cr3t-value';

/** A logger writing synchronously into an array of parsed lines. */
function capture(): { lines: Record<string, unknown>[]; log: ReturnType<typeof createLogger> } {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { lines, log: createLogger({ level: 'info', destination }) };
}

describe('createLogger redaction', () => {
  it('censors a secret key at the top level and one and two levels down, headers included', () => {
    const { lines, log } = capture();
    log.info({ authorization: `Bearer ${SECRET}` }, 'top');
    log.info({ tokens: { access_token: SECRET, refresh_token: SECRET } }, 'one down');
    log.info({ req: { headers: { authorization: `Bearer ${SECRET}`, Authorization: SECRET } } });
    log.info({
      err: { response: { body: SECRET } },
      config: { credentials: { clientSecret: SECRET } },
    });
    log.info({ headers: { 'proxy-authorization': SECRET, cookie: SECRET, 'set-cookie': SECRET } });
    log.child({ component: 'token', password: SECRET }).info({ token: SECRET }, 'child');
    expect(lines).toHaveLength(6);
    expect(JSON.stringify(lines)).not.toContain(SECRET);
    expect(lines[2]).toEqual(
      expect.objectContaining({
        req: { headers: { authorization: '[redacted]', Authorization: '[redacted]' } },
      }),
    );
    expect(lines[5]).toEqual(expect.objectContaining({ component: 'token', token: '[redacted]' }));
  });

  it('leaves every other field as it is', () => {
    const { lines, log } = capture();
    log.info({ component: 'proxy', address: { host: '127.0.0.1', port: 8080 } }, 'listening');
    expect(lines[0]).toEqual(
      expect.objectContaining({
        level: 'info',
        component: 'proxy',
        address: { host: '127.0.0.1', port: 8080 },
        msg: 'listening',
      }),
    );
  });

  it('lists no path that another path already covers', () => {
    const covered = REDACT_PATHS.filter((path) => {
      const parts = path.split('.');
      return REDACT_PATHS.some((other) => {
        const by = other.split('.');
        return (
          other !== path &&
          by.length === parts.length &&
          by.every((part, i) => part === '*' || part === parts[i])
        );
      });
    });
    expect(covered).toEqual([]);
  });
});

describe('wantsColour', () => {
  it('colours only on a terminal, and never with NO_COLOR set to something', () => {
    expect(wantsColour({ isTTY: true }, {})).toBe(true);
    expect(wantsColour({ isTTY: true }, { NO_COLOR: '' })).toBe(true);
    expect(wantsColour({ isTTY: true }, { NO_COLOR: '1' })).toBe(false);
    expect(wantsColour({ isTTY: false }, {})).toBe(false);
    expect(wantsColour({}, {})).toBe(false);
  });
});
