import { createServer as createHttpsServer, type Server } from 'node:https';
import { createSecureServer, type Http2SecureServer, type Http2Session } from 'node:http2';
import type { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { handleApiRequest } from './api.js';
import { envelope, sendJson, type Req, type Res } from './http.js';
import { handleIssuerRequest } from './issuer.js';
import { createTestPki } from './pki.js';
import { createState, type StandinState } from './state.js';
import { handleTokenRequest } from './token-endpoint.js';
import type { CallerTokenClaims, Standin, StandinOptions, TokenFault } from './types.js';

const TOKEN_PATHS = new Set(['/oauth/token/', '/oauth/token']);

function route(req: Req, res: Res, state: StandinState, url: () => string): Promise<void> {
  const path = (req.url ?? '/').split('?')[0]!;
  if (TOKEN_PATHS.has(path)) return handleTokenRequest(req, res, state);
  const issuerRoutes = {
    issuer: state.issuer,
    url,
    readerToken: () => state.issuerReaderToken,
    requests: state.issuerRequests,
    now: () => state.clock.now(),
  };
  if (handleIssuerRequest(req, res, path, issuerRoutes)) return Promise.resolve();
  return handleApiRequest(req, res, state);
}

/**
 * Start the stand-in of the commodities API over HTTPS (and HTTP/2 through ALPN when asked).
 * Every socket is tracked, so close() ends hung and streaming requests at once.
 */
export async function startStandin(options: StandinOptions = {}): Promise<Standin> {
  const pki = options.pki ?? (await createTestPki());
  const state = await createState(options);
  const clock = state.clock;
  let url = '';

  const onRequest = (req: Req, res: Res): void => {
    route(req, res, state, () => url).catch((error: unknown) => {
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
  url = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      state.timers.clearAll();
      server.close(() => resolve());
      destroyConnections();
    });
    return closing;
  };

  const caller = {
    keyPem: state.issuer.privateKeyPem,
    kid: state.issuer.kid,
    jwks: state.issuer.jwks,
    mint: (claims: CallerTokenClaims) => state.issuer.mint(url, claims, clock.now()),
    setReaderToken: (token: string | undefined) => {
      state.issuerReaderToken = token;
    },
  };
  return { url, port, caCert: pki.caCert, caller, ...controls(state), close };
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
function controls(
  state: StandinState,
): Omit<Standin, 'url' | 'port' | 'caCert' | 'caller' | 'close'> {
  return {
    tokenRequests: state.tokenRequests,
    apiRequests: state.apiRequests,
    issuerRequests: state.issuerRequests,
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
