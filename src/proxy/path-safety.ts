/**
 * Which request targets may be forwarded (docs/design.md "Proxy"). Judged on the raw request
 * target exactly as it arrived (`req.url`), before any URL parser had a chance to normalise it:
 * a target that a parser would "clean up" is exactly the one that reaches something else upstream.
 */

export type TargetVerdict =
  | {
      ok: true;
      /** The raw path (no query), as received. */
      path: string;
      /** The raw query including its leading `?`, or an empty string. */
      query: string;
    }
  | {
      ok: false;
      code: 'bad_request' | 'not_found';
      /** Safe to show the client: says which rule refused the target, never echoes it. */
      reason: string;
    };

/** Printable US-ASCII without space (RFC 9112 §3.2: a request target never holds CTLs or SP). */
const PRINTABLE_ASCII = /^[\x21-\x7e]*$/;
/** A `%` not followed by two hex digits: upstream parsers disagree on what it means. */
const MALFORMED_ESCAPE = /%(?![0-9a-fA-F]{2})/;
/** Encoded slash or backslash, also double-encoded (`%252f`), which some servers decode twice. */
const ENCODED_SEPARATOR = /%(?:25)?(?:2f|5c)/i;
/**
 * An encoded control character (`%00`–`%1F`, `%7F`) anywhere in the target: a NUL or CR/LF that
 * an upstream decodes can end a string or a header line early (docs/design.md "Bounded work").
 */
const ENCODED_CONTROL = /%(?:[01][0-9a-f]|7f)/i;
/** Double-encoded dot, for the same reason. */
const DOUBLE_ENCODED_DOT = /%252e/i;

function bad(reason: string): TargetVerdict {
  return { ok: false, code: 'bad_request', reason };
}

/**
 * A `.`/`..` segment, also with `%2e` for a dot and with a `;param` tail (`..;` is `..` to Tomcat
 * and friends). One scan of the path instead of a split and a decode per segment.
 */
const DOT_SEGMENT = /(?:^|\/)(?:\.|%2e)(?:\.|%2e)?(?:;[^/]*)?(?:\/|$)/i;

/**
 * Decide whether a raw request target may be forwarded. Order matters: an unsafe target is a 400
 * even when it would also fall outside the prefixes, so probing never learns the allow-list.
 *
 * @param rawTarget `req.url` as node delivered it (HTTP/2: the `:path` pseudo-header).
 * @param prefixes allowed path prefixes, each starting (and normally ending) with `/`.
 */
export function checkRequestTarget(rawTarget: string, prefixes: readonly string[]): TargetVerdict {
  if (rawTarget.length === 0) return bad('empty request target');
  if (!PRINTABLE_ASCII.test(rawTarget)) {
    return bad('control, space or non-ASCII characters in the request target');
  }
  // RFC 9112 §3.2.2/§3.2.3: absolute-form is for proxies, authority-form for CONNECT; this is
  // not an open proxy, so only origin-form (`/path?query`) is accepted.
  if (!rawTarget.startsWith('/')) return bad('only origin-form request targets are accepted');
  // `//host/...` reads as a network-path reference (RFC 3986 §4.2) to anything that resolves it.
  if (rawTarget.startsWith('//')) return bad('request target starts with "//"');
  if (rawTarget.includes('#')) return bad('fragment in the request target');
  if (ENCODED_CONTROL.test(rawTarget))
    return bad('encoded control character in the request target');

  const queryAt = rawTarget.indexOf('?');
  const path = queryAt === -1 ? rawTarget : rawTarget.slice(0, queryAt);
  const query = queryAt === -1 ? '' : rawTarget.slice(queryAt);

  if (path.includes('\\')) return bad('backslash in the path');
  if (ENCODED_SEPARATOR.test(path)) return bad('encoded slash or backslash in the path');
  if (MALFORMED_ESCAPE.test(path)) return bad('malformed percent-encoding in the path');
  if (DOUBLE_ENCODED_DOT.test(path)) return bad('double-encoded dot in the path');
  if (DOT_SEGMENT.test(path)) return bad('dot segment in the path');

  if (!prefixes.some((prefix) => path.startsWith(prefix))) {
    return { ok: false, code: 'not_found', reason: 'path is outside the forwarded prefixes' };
  }
  return { ok: true, path, query };
}

/**
 * The path part of a raw target, for logs: the query is left out because it may carry data the
 * caller did not mean to log. Truncated so a hostile target cannot bloat a log line.
 */
export function pathForLog(rawTarget: string, maxLength = 256): string {
  const queryAt = rawTarget.indexOf('?');
  const path = queryAt === -1 ? rawTarget : rawTarget.slice(0, queryAt);
  return path.length > maxLength ? `${path.slice(0, maxLength)}…` : path;
}
