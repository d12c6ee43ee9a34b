/**
 * The stand-in as a caller-token issuer (docs/security.md "Caller identity on the shared gateway"):
 * what a Kubernetes API server serves for service-account tokens — OIDC discovery at
 * `/.well-known/openid-configuration`, its keys at `/openid/v1/jwks` — and tokens minted offline
 * under the same key, so a sidecar with `CALLER_AUTH=jwt` can be tried without a cluster. One ES256 key (P-256) per stand-in, given as
 * PKCS#8 PEM to keep it across runs; no private material is ever served.
 */
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
} from 'node:crypto';
import { calculateJwkThumbprint, SignJWT, type JWK } from 'jose';
import { sendJson, type Req, type Res } from './http.js';

export const DISCOVERY_PATH = '/.well-known/openid-configuration';
/** Where the Kubernetes API server serves its service-account keys; the stand-in uses the same. */
export const JWKS_PATH = '/openid/v1/jwks';
export const CALLER_TOKEN_ALG = 'ES256';
/** The audience the sidecar requires by default (`CALLER_JWT_AUDIENCE`). */
export const DEFAULT_CALLER_AUDIENCE = 'oauth-sidecar';
/** Longest lifetime a minted token may have: a day (a projected token's default is an hour). */
export const MAX_CALLER_TOKEN_TTL_SECONDS = 86_400;

/** What a minted caller token says. */
export interface CallerTokenClaims {
  /** `sub`, e.g. `system:serviceaccount:research:notebook`. */
  sub: string;
  /** `aud`; default `oauth-sidecar`. */
  aud?: string | string[];
  /** Seconds from now to `exp`; default 3600. */
  ttlSeconds?: number;
}

export interface CallerIssuer {
  /** The key's `kid`: its RFC 7638 thumbprint. */
  readonly kid: string;
  /** The signing key as PKCS#8 PEM, for a file that keeps it across runs (mode 0600). */
  readonly privateKeyPem: string;
  /** `{ keys: [the public key] }`. */
  readonly jwks: { keys: JWK[] };
  /** A signed token of `issuer` for these claims, issued at `nowMs`. */
  mint(issuer: string, claims: CallerTokenClaims, nowMs: number): Promise<string>;
}

/** The issuer for `privateKeyPem` (an EC P-256 PKCS#8 key), or a fresh key when absent. */
export async function createCallerIssuer(privateKeyPem?: string): Promise<CallerIssuer> {
  const privateKey: KeyObject =
    privateKeyPem === undefined
      ? generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey
      : createPrivateKey(privateKeyPem);
  if (
    privateKey.asymmetricKeyType !== 'ec' ||
    privateKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1'
  ) {
    throw new Error('the caller-token key must be an EC P-256 private key (ES256)');
  }
  const { kty, crv, x, y } = createPublicKey(privateKey).export({ format: 'jwk' });
  const publicJwk: JWK = { kty, crv, x, y };
  const kid = await calculateJwkThumbprint(publicJwk);
  const jwk: JWK = { ...publicJwk, kid, alg: CALLER_TOKEN_ALG, use: 'sig' };
  return {
    kid,
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    jwks: { keys: [jwk] },
    mint: (issuer, claims, nowMs) => mintCallerToken(privateKey, kid, issuer, claims, nowMs),
  };
}

/** A problem with the claims asked for, or undefined when they can be minted. */
export function callerClaimsProblem(claims: CallerTokenClaims): string | undefined {
  if (claims.sub === '' || /[\s\p{Cc}]/u.test(claims.sub)) {
    return 'the subject must be non-empty, without spaces or control characters';
  }
  const ttl = claims.ttlSeconds ?? 3600;
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > MAX_CALLER_TOKEN_TTL_SECONDS) {
    return `the lifetime must be whole seconds from 1 to ${MAX_CALLER_TOKEN_TTL_SECONDS}`;
  }
  const audiences = [claims.aud ?? DEFAULT_CALLER_AUDIENCE].flat();
  if (audiences.length === 0 || audiences.some((aud) => aud === '')) {
    return 'the audience must be non-empty';
  }
  return undefined;
}

async function mintCallerToken(
  key: KeyObject,
  kid: string,
  issuer: string,
  claims: CallerTokenClaims,
  nowMs: number,
): Promise<string> {
  const problem = callerClaimsProblem(claims);
  if (problem !== undefined) throw new Error(problem);
  const now = Math.floor(nowMs / 1000);
  return new SignJWT(kubernetesClaim(claims.sub))
    .setProtectedHeader({ alg: CALLER_TOKEN_ALG, kid, typ: 'JWT' })
    .setIssuer(issuer)
    .setSubject(claims.sub)
    .setAudience(claims.aud ?? DEFAULT_CALLER_AUDIENCE)
    .setIssuedAt(now)
    .setNotBefore(now)
    .setExpirationTime(now + (claims.ttlSeconds ?? 3600))
    .sign(key);
}

/** The `kubernetes.io` claim a projected service-account token carries, for such subjects. */
function kubernetesClaim(sub: string): Record<string, unknown> {
  const match = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(sub);
  if (match === null) return {};
  return { 'kubernetes.io': { namespace: match[1], serviceaccount: { name: match[2] } } };
}

/** What the stand-in's issuer routes need. */
export interface IssuerRoutes {
  readonly issuer: CallerIssuer;
  /** The base URL: the `iss` of its tokens. */
  readonly url: () => string;
  /** When set, discovery and keys want `Authorization: Bearer <this>` (as the API server does). */
  readonly readerToken: () => string | undefined;
  /** One entry per discovery or JWKS request, for tests that count fetches. */
  readonly requests: { at: number; path: string; status: number }[];
  readonly now: () => number;
}

/** Answer discovery or JWKS requests; false when `path` is neither. */
export function handleIssuerRequest(
  req: Req,
  res: Res,
  path: string,
  routes: IssuerRoutes,
): boolean {
  if (path !== DISCOVERY_PATH && path !== JWKS_PATH) return false;
  const record = (status: number): void => {
    routes.requests.push({ at: routes.now(), path, status });
  };
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    record(405);
    sendJson(res, 405, undefined, { allow: 'GET, HEAD' });
    return true;
  }
  const wanted = routes.readerToken();
  if (wanted !== undefined && req.headers.authorization !== `Bearer ${wanted}`) {
    record(401);
    sendJson(res, 401, { kind: 'Status', status: 'Failure', reason: 'Unauthorized', code: 401 });
    return true;
  }
  record(200);
  const base = routes.url();
  const body =
    path === JWKS_PATH
      ? routes.issuer.jwks
      : {
          issuer: base,
          jwks_uri: `${base}${JWKS_PATH}`,
          response_types_supported: ['id_token'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: [CALLER_TOKEN_ALG],
        };
  // The API server's own content type for the keys.
  const type = path === JWKS_PATH ? 'application/jwk-set+json' : 'application/json';
  sendJson(res, 200, body, { 'content-type': type, 'cache-control': 'public, max-age=3600' });
  return true;
}
