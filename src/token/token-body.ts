/**
 * A 2xx token endpoint answer's JSON body, read into a `TokenSet` one field at a time. Field names
 * are accepted in either casing (camelCase first); `expiresIn` may be a number or a string of
 * decimal digits ("1799"), anything else but absence is malformed (absent:
 * {@link DEFAULT_LIFETIME_SECONDS}). A bad field throws {@link FieldError}, whose message names the
 * field and never shows a token.
 */
import { showValue, typeName } from '../safe-text.js';
import type { TokenSet } from './types.js';

/** Lifetime assumed when an answer has no `expiresIn` (docs/design.md "Token keeper"). */
export const DEFAULT_LIFETIME_SECONDS = 300;
/** Largest `expiresIn` accepted (2^31−1 s, about 68 years); larger is a malformed answer. */
export const MAX_EXPIRES_IN_SECONDS = 2 ** 31 - 1;
/** Longest access token accepted (8 KiB): it must fit in a request header. */
export const MAX_ACCESS_TOKEN_CHARS = 8192;
/** RFC 6750 §2.1 `b64token`: the only characters a Bearer credential may carry. */
const B64TOKEN = /^[A-Za-z0-9._~+/-]+=*$/;

/** Thrown by the field readers; turned into a `malformed` TokenEndpointError by the caller. */
export class FieldError extends Error {}

/** The token set of a token answer's body (a JSON object). */
export function parseTokenSet(body: Record<string, unknown>): TokenSet {
  // In this order: the first bad field is the one reported.
  const accessToken = readAccessToken(body);
  const tokenType = readTokenType(body);
  const lifetime = readLifetime(body);
  return {
    accessToken,
    tokenType,
    expiresInSeconds: lifetime.seconds,
    lifetimeDefaulted: lifetime.defaulted,
    refreshToken: readRefreshToken(body),
  };
}

function readAccessToken(body: Record<string, unknown>): string {
  const { value, label } = field(body, 'accessToken', 'access_token');
  if (typeof value !== 'string' || value.length === 0) {
    throw new FieldError(
      value === undefined
        ? `token endpoint answer: ${label} is missing`
        : `token endpoint answer: ${label} must be a non-empty string (got ${typeName(value)})`,
    );
  }
  // A token undici cannot put in a header (CR/LF, space, non-ASCII) would fail every request for
  // its whole lifetime. The message never shows the value: it may be a working credential.
  if (value.length > MAX_ACCESS_TOKEN_CHARS || !B64TOKEN.test(value)) {
    throw new FieldError(
      `token endpoint answer: ${label} must be an RFC 6750 b64token ([A-Za-z0-9._~+/-]+ then optional =) of at most ${MAX_ACCESS_TOKEN_CHARS} characters (got ${value.length} characters${B64TOKEN.test(value) ? '' : ', some outside that set'})`,
    );
  }
  return value;
}

function readTokenType(body: Record<string, unknown>): 'bearer' {
  const { value, label } = field(body, 'tokenType', 'token_type');
  if (value === undefined) {
    throw new FieldError(`token endpoint answer: ${label} is missing`);
  }
  if (typeof value !== 'string' || value.toLowerCase() !== 'bearer') {
    throw new FieldError(
      `token endpoint answer: ${label} must be "Bearer" (got ${showValue(value)})`,
    );
  }
  return 'bearer';
}

function readLifetime(body: Record<string, unknown>): { seconds: number; defaulted: boolean } {
  const { value, label } = field(body, 'expiresIn', 'expires_in');
  if (value === undefined) return { seconds: DEFAULT_LIFETIME_SECONDS, defaulted: true };
  const seconds = toNonNegativeInteger(value);
  if (seconds === undefined) {
    throw new FieldError(
      `token endpoint answer: ${label} must be a non-negative integer (got ${showValue(value)})`,
    );
  }
  if (seconds > MAX_EXPIRES_IN_SECONDS) {
    throw new FieldError(
      `token endpoint answer: ${label} must be at most ${MAX_EXPIRES_IN_SECONDS} seconds (got ${showValue(value)})`,
    );
  }
  return { seconds, defaulted: false };
}

/** A string replaces the held refresh token, null drops it, absence keeps it (keeper.ts). */
function readRefreshToken(body: Record<string, unknown>): string | null | undefined {
  const { value, label } = field(body, 'refreshToken', 'refresh_token');
  if (value === undefined || value === null) return value;
  if (typeof value !== 'string' || value.length === 0) {
    throw new FieldError(
      `token endpoint answer: ${label} must be a non-empty string or null (got ${typeName(value)})`,
    );
  }
  return value;
}

/** One field in either casing, with the name to print: the one present, else both. */
function field(
  body: Record<string, unknown>,
  camel: string,
  snake: string,
): { value: unknown; label: string } {
  if (Object.hasOwn(body, camel)) return { value: body[camel], label: `"${camel}"` };
  if (Object.hasOwn(body, snake)) return { value: body[snake], label: `"${snake}"` };
  return { value: undefined, label: `"${camel}" (or "${snake}")` };
}

function toNonNegativeInteger(value: unknown): number | undefined {
  if (typeof value === 'number') {
    return Number.isSafeInteger(value) && value >= 0 ? value : undefined;
  }
  if (typeof value === 'string' && /^\d{1,15}$/.test(value)) return Number(value);
  return undefined;
}
