import { createServer as createHttpsServer, type Server } from 'node:https';
import { createSecureServer, type Http2SecureServer, type Http2Session } from 'node:http2';
import type { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { systemClock } from '../clock.js';
import { handleApiRequest } from './api.js';
import { envelope, sendJson, Timers, type Req, type Res } from './http.js';
import { createTestPki } from './pki.js';
import type { StandinState } from './state.js';
import { handleTokenRequest } from './token-endpoint.js';
import { TokenStore } from './tokens.js';
import type { Standin, StandinOptions, TokenFault } from './types.js';

const TOKEN_PATHS = new Set(['/oauth/token/', '/oauth/token']);

function route(req: Req, res: Res, state: StandinState): Promise<void> {
  const path = (req.url ?? '/').split('?')[0]!;
  if (TOKEN_PATHS.has(path)) return handleTokenRequest(req, res, state);
  return handleApiRequest(req, res, state);
}

/**
 * Start the stand-in of the commodities API over HTTPS (and HTTP/2 through ALPN when asked).
 * Every socket is tracked, so close() ends hung and streaming requests at once.
 */
export async function startStandin(options: StandinOptions = {}): Promise<Standin> {
  const pki = options.pki ?? (await createTestPki());
  const clock = options.clock ?? systemClock;
  const state: StandinState = {
    clientId: options.clientId ?? 'demo-client',
    clientSecret: options.clientSecret ?? 'demo-secret',
    tokenStatus: options.tokenStatus ?? 201,
    tokens: new TokenStore(() => clock.now(), options.tokenLifetimeSeconds ?? 1799),
    tokenRequests: [],
    apiRequests: [],
    nullRefreshTokenNext: 0,
    omitRefreshTokenNext: 0,
    faultQueue: [],
    randomFault: undefined,
    apiFaults: new Map(),
    clock,
    timers: new Timers(clock),
    logger: options.logger,
  };

  const onRequest = (req: Req, res: Res): void => {
    route(req, res, state).catch((error: unknown) => {
      state.logger?.error({ err: error }, 'stand-in request failed');
      if (!res.headersSent) sendJson(res, 500, envelope('internal_error', 'stand-in failure'));
      else res.destroy();
    });
  };

  const tls = { key: pki.serverKey, cert: pki.serverCert };
  const server =
    options.http2 === true
      ? createSecureServer({ ...tls, allowHTTP1: true }, onRequest)
      : createHttpsServer({ ...tls, keepAlive: true }, onRequest);

  const destroyConnections = trackConnections(server);

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const host = options.host ?? '127.0.0.1';
  const url = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      state.timers.clearAll();
      server.close(() => resolve());
      destroyConnections();
    });
    return closing;
  };

  return { url, port, caCert: pki.caCert, ...controls(state), close };
}

/** Every socket and session, so close() ends hung and streaming requests at once. */
function trackConnections(server: Server | Http2SecureServer): () => void {
  const sockets = new Set<Socket>();
  const sessions = new Set<Http2Session>();
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  server.on('connection', track);
  server.on('secureConnection', track);
  server.on('session', (session: Http2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  // Clients that vanish mid-handshake or mid-stream are the tests' business, not a crash.
  server.on('tlsClientError', () => undefined);
  server.on('sessionError', () => undefined);
  return () => {
    for (const session of sessions) session.destroy();
    for (const socket of sockets) socket.destroy();
  };
}

/** What a test steers the stand-in with. */
function controls(state: StandinState): Omit<Standin, 'url' | 'port' | 'caCert' | 'close'> {
  return {
    tokenRequests: state.tokenRequests,
    apiRequests: state.apiRequests,
    issuedTokens: () => state.tokens.issued(),
    accessTokenValid: (token: string) => state.tokens.accessTokenValid(token),
    setClientSecret: (secret: string) => {
      state.clientSecret = secret;
    },
    setTokenLifetime: (seconds: number) => {
      state.tokens.lifetimeSeconds = seconds;
    },
    nullRefreshTokenNext: (count = 1) => {
      state.nullRefreshTokenNext += count;
    },
    omitRefreshTokenNext: (count = 1) => {
      state.omitRefreshTokenNext += count;
    },
    failTokenRequests: (fault: TokenFault, times = 1) => {
      state.faultQueue.push({ fault, remaining: times });
    },
    failTokenRequestsRandomly: (fault: TokenFault, ratio: number) => {
      state.randomFault = ratio > 0 ? { fault, ratio } : undefined;
    },
    clearTokenFaults: () => {
      state.faultQueue.length = 0;
      state.randomFault = undefined;
    },
    failApiRequests: (prefix: string, status: number, retryAfter?: string) => {
      state.apiFaults.set(prefix, { status, retryAfter });
    },
    clearApiFaults: () => state.apiFaults.clear(),
    revokeAccessTokens: () => state.tokens.revokeAccessTokens(),
    revokeRefreshTokens: () => state.tokens.revokeRefreshTokens(),
  };
}
