/** The keeper's log lines about token requests: their fields, and never a token or a secret. */
import { describe, expect, it } from 'vitest';
import { TokenEndpointError } from '../errors.js';
import { createLogger } from '../telemetry/logger.js';
import { logAdopted, logFailure, logObtained } from './keeper-log.js';
import type { TokenSet } from './types.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');

function capture(): {
  log: ReturnType<typeof createLogger>;
  lines: () => Record<string, unknown>[];
  raw: string[];
} {
  const raw: string[] = [];
  const log = createLogger({
    level: 'trace',
    destination: { write: (line: string) => void raw.push(line) },
  });
  return { log, raw, lines: () => raw.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

const tokenSet: TokenSet = {
  accessToken: 'access-secret-1',
  tokenType: 'bearer',
  expiresInSeconds: 1799,
  lifetimeDefaulted: false,
  refreshToken: 'refresh-secret-1',
};

describe('keeper log lines', () => {
  it('obtained: the grant, lifetime and next renewal; a defaulted lifetime warns first', () => {
    const { log, lines, raw } = capture();
    logObtained(log, 'refresh_token', tokenSet, { refreshTokenHeld: true, renewAt: T0 });
    expect(lines()).toEqual([
      expect.objectContaining({
        level: 'info',
        event: 'token',
        grant: 'refresh_token',
        outcome: 'success',
        lifetimeSeconds: 1799,
        refreshTokenHeld: true,
        nextRenewalAt: '2030-01-01T00:00:00.000Z',
        msg: 'access token obtained',
      }),
    ]);
    logObtained(
      log,
      'client_credentials',
      { ...tokenSet, expiresInSeconds: 300, lifetimeDefaulted: true },
      {
        refreshTokenHeld: false,
        renewAt: T0,
      },
    );
    expect(lines()[1]).toMatchObject({
      level: 'warn',
      msg: 'token endpoint answer had no expiresIn; assuming 300 s',
    });
    expect(lines()).toHaveLength(3);
    expect(raw.join('')).not.toMatch(/secret-1/);
  });

  it('adopted: the set’s grant, generation and lifetime', () => {
    const { log, lines, raw } = capture();
    logAdopted(
      log,
      {
        accessToken: 'access-secret-2',
        refreshToken: 'refresh-secret-2',
        sentAt: T0,
        lifetimeSeconds: 600,
        grant: 'client_credentials',
      },
      7,
      T0 + 540_000,
    );
    expect(lines()[0]).toMatchObject({
      outcome: 'adopted',
      generation: 7,
      lifetimeSeconds: 600,
      grant: 'client_credentials',
      nextRenewalAt: '2030-01-01T00:09:00.000Z',
    });
    expect(raw.join('')).not.toMatch(/secret-2/);
  });

  it('failure: rejected or error, the kind, status and OAuth error, and what happens next', () => {
    const { log, lines } = capture();
    const rejected = new TokenEndpointError(
      'rejected',
      'token endpoint answered 401 invalid_client',
      {
        status: 401,
        oauthError: 'invalid_client',
        body: '{"error":"invalid_client","client_secret":"s3cr3t-in-body"}',
      },
    );
    logFailure(
      log,
      'client_credentials',
      rejected,
      { consecutiveFailures: 2, tokenValid: true },
      'retrying soon',
    );
    logFailure(
      log,
      'refresh_token',
      new Error('socket hang up'),
      { consecutiveFailures: 3, tokenValid: false },
      'x',
    );
    expect(lines()[0]).toMatchObject({
      level: 'warn',
      grant: 'client_credentials',
      outcome: 'rejected',
      errorKind: 'rejected',
      error: 'token endpoint answered 401 invalid_client',
      status: 401,
      oauthError: 'invalid_client',
      consecutiveFailures: 2,
      tokenValid: true,
      msg: 'token request failed; retrying soon',
    });
    expect(lines()[1]).toMatchObject({
      outcome: 'error',
      errorKind: 'internal',
      tokenValid: false,
    });
    expect(lines()[1]).not.toHaveProperty('status');
    expect(JSON.stringify(lines())).not.toContain('s3cr3t-in-body');
  });
});
