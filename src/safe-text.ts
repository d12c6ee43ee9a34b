/**
 * Text that goes into a log line, an error message or `/status` from something the sidecar does
 * not control (an endpoint's answer, a URL, a rejected setting): control characters out, length
 * capped, credentials (user-info, query, passwords, token values) never shown. One module for the
 * token client and the configuration alike. Imports nothing internal.
 */

/** Longest piece of foreign text (an OAuth error description, a header) copied into a message. */
export const MAX_DESCRIPTION_CHARS = 200;

/** Control characters out (no log-line forging), length capped. */
export function clean(text: string): string {
  // eslint-disable-next-line no-control-regex
  const stripped = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, ' ').trim();
  return stripped.length > MAX_DESCRIPTION_CHARS
    ? `${stripped.slice(0, MAX_DESCRIPTION_CHARS)}…`
    : stripped;
}

/** Content-type and length only: a body itself may carry a token. */
export function describeBody(contentType: string | null, text: string): string {
  const type = contentType === null ? 'none' : clean(contentType);
  return `content-type ${type}, ${Buffer.byteLength(text)} bytes`;
}

/** TLS verification codes that mean "signed by a CA this process does not trust". */
const UNTRUSTED_CA = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
]);

/** What to do about an untrusted certificate: the setting that adds a CA. */
export const UNTRUSTED_CA_HINT =
  "the server's certificate is not from a CA this process trusts: set UPSTREAM_CA_FILE " +
  '(upstream.caFile) to the PEM bundle of the CA that signed it';

/**
 * undici wraps the real failure (`fetch failed`) in `cause`; name that one, with its code, and
 * for an untrusted certificate the setting that fixes it.
 */
export function describeCause(error: unknown): string {
  let inner: unknown = error;
  while (inner instanceof Error && inner.message === 'fetch failed' && inner.cause !== undefined) {
    inner = inner.cause;
  }
  if (!(inner instanceof Error)) return 'unknown error';
  const code = (inner as { code?: unknown }).code;
  const text = clean(inner.message);
  const described = typeof code === 'string' && !text.includes(code) ? `${code} ${text}` : text;
  return typeof code === 'string' && UNTRUSTED_CA.has(code)
    ? `${described} (${UNTRUSTED_CA_HINT})`
    : described;
}

/** Messages may quote the request path: keep the URL's query and user-info out of `text`. */
export function redact(text: string, url: string): string {
  let out = text;
  try {
    const { search, username, password } = new URL(url);
    for (const part of [search.slice(1), username, password]) {
      if (part.length > 0) out = out.split(part).join('…');
    }
  } catch {
    // An unparseable URL never reached the wire; nothing of it can be quoted.
  }
  return out;
}

/** Origin and path only: user-info and query may carry credentials. */
export function safeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return clean(`${parsed.origin}${parsed.pathname}`);
  } catch {
    return '(unparseable URL)';
  }
}

/** A Location header, relative or absolute, without user-info or query. */
export function safeLocation(location: string): string {
  try {
    const parsed = new URL(location, 'http://relative.invalid');
    if (parsed.origin === 'http://relative.invalid') return clean(parsed.pathname);
    return clean(`${parsed.origin}${parsed.pathname}`);
  } catch {
    return '(unparseable Location)';
  }
}

/** A wire value that cannot be a secret (a lifetime, a token type), as JSON, shortened. */
export function showValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  const json = JSON.stringify(value);
  return json.length > 40 ? `${json.slice(0, 40)}…` : json;
}

/** A rejected (non-secret) setting, quoted and shortened so a pasted blob cannot flood a terminal. */
export function shown(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const clipped = text.length > 60 ? `${text.slice(0, 57)}...` : text;
  return JSON.stringify(clipped);
}

/** What kind of value arrived, without the value (it may be a secret). */
export function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return value.length === 0 ? 'an empty string' : 'a string';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
