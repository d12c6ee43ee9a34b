import { describe, expect, it } from 'vitest';
import { UsageError, parseArgs } from './cli.js';

describe('parseArgs', () => {
  it('serves by default', () => {
    expect(parseArgs([])).toEqual({ command: 'serve', configFile: undefined, offline: false });
  });

  it('reads the command and --config in either order and form', () => {
    expect(parseArgs(['check', '--config', 'a.yaml'])).toEqual({
      command: 'check',
      configFile: 'a.yaml',
      offline: false,
    });
    expect(parseArgs(['--config=b.yaml', 'demo'])).toEqual({
      command: 'demo',
      configFile: 'b.yaml',
      offline: false,
    });
    expect(parseArgs(['-c', 'c.yaml'])).toMatchObject({ command: 'serve', configFile: 'c.yaml' });
  });

  it('reads --offline for check, before or after it, and refuses it elsewhere', () => {
    expect(parseArgs(['check', '--offline', '-c', 'k.yaml'])).toEqual({
      command: 'check',
      configFile: 'k.yaml',
      offline: true,
    });
    expect(parseArgs(['--offline', 'check']).offline).toBe(true);
    expect(() => parseArgs(['--offline'])).toThrow(
      new UsageError('--offline applies to check only'),
    );
    expect(() => parseArgs(['demo', '--offline'])).toThrow(
      new UsageError('--offline applies to check only'),
    );
  });

  it('answers help and version', () => {
    expect(parseArgs(['--help']).command).toBe('help');
    expect(parseArgs(['check', '-h']).command).toBe('help');
    expect(parseArgs(['--version']).command).toBe('version');
  });

  it('refuses unknown commands, unknown options and a missing file', () => {
    expect(() => parseArgs(['frobnicate'])).toThrow(new UsageError('unknown command frobnicate'));
    expect(() => parseArgs(['--verbose'])).toThrow(new UsageError('unknown option --verbose'));
    expect(() => parseArgs(['--config'])).toThrow(new UsageError('--config needs a file'));
    expect(() => parseArgs(['check', 'demo'])).toThrow(new UsageError('unknown command demo'));
  });

  it('reads standin token with its options in either form', () => {
    expect(parseArgs(['standin', 'token', '--sub', 'system:serviceaccount:ns:app'])).toEqual({
      command: 'standin-token',
      configFile: undefined,
      offline: false,
      token: { sub: 'system:serviceaccount:ns:app', aud: undefined, ttlSeconds: undefined },
    });
    expect(parseArgs(['standin', 'token', '--ttl=60', '--aud', 'gw', '--sub=a'])).toEqual({
      command: 'standin-token',
      configFile: undefined,
      offline: false,
      token: { sub: 'a', aud: 'gw', ttlSeconds: 60 },
    });
    expect(parseArgs(['standin'])).toEqual({
      command: 'standin',
      configFile: undefined,
      offline: false,
    });
  });

  it('refuses standin token without a subject, with a bad lifetime, and its options elsewhere', () => {
    expect(() => parseArgs(['standin', 'token'])).toThrow(
      new UsageError('standin token needs --sub SUBJECT'),
    );
    expect(() => parseArgs(['standin', 'token', '--sub'])).toThrow(
      new UsageError('--sub needs a value'),
    );
    expect(() => parseArgs(['standin', 'token', '--sub='])).toThrow(
      new UsageError('--sub needs a value'),
    );
    expect(() => parseArgs(['standin', 'token', '--sub', 'a', '--ttl', '1h'])).toThrow(
      new UsageError('--ttl needs whole seconds'),
    );
    expect(() => parseArgs(['standin', 'token', '--sub', 'a', '--ttl', '0'])).toThrow(
      new UsageError('--ttl needs whole seconds'),
    );
    expect(() => parseArgs(['standin', '--sub', 'a'])).toThrow(
      new UsageError('unknown option --sub'),
    );
    expect(() => parseArgs(['token'])).toThrow(new UsageError('unknown command token'));
    expect(() => parseArgs(['standin', 'token', 'token'])).toThrow(
      new UsageError('unknown command token'),
    );
  });
});
