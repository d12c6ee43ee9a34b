/**
 * The egress proxy settings (docs/configuration.md "Egress proxy"): the proxy URL as curl, npm and
 * undici read `HTTPS_PROXY`, and `NO_PROXY` with curl's semantics. Which proxy an origin uses is
 * decided once, at start, for each of the two origins the sidecar talks to (the API and the token
 * endpoint), so a request pays nothing for the matching. Imports nothing from undici.
 */
import { BlockList, isIP } from 'node:net';
import { shown } from '../safe-text.js';
import { INVALID, list, type Parser } from './parsers.js';
import type { EgressConfig } from './types.js';

const PROXY_EXPECTED =
  'must be an http:// or https:// proxy URL, e.g. http://user:password@proxy.corp:3128';

/**
 * Whether the percent-escapes of a URL's user or password decode, as undici decodes them for the
 * `Proxy-Authorization` header: a `%` without two hex digits, or escapes that are no UTF-8
 * (`%ff`), would throw there, at start.
 */
function decodes(part: string): boolean {
  try {
    decodeURIComponent(part);
    return true;
  } catch {
    return false;
  }
}

/**
 * A proxy URL: `http://` or `https://` (no scheme means `http://`, as curl reads it), a host, a
 * port (default: the scheme's), nothing after the authority, a user and password whose
 * percent-escapes decode. The value may hold a secret (an API key as the user name is common), so
 * no message ever repeats it.
 */
export function proxyUrl(): Parser<string> {
  return (raw, report) => {
    if (typeof raw !== 'string' || raw.trim() === '') {
      report(PROXY_EXPECTED);
      return INVALID;
    }
    const text = raw.trim();
    let url: URL;
    try {
      url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`);
    } catch {
      report(`${PROXY_EXPECTED} (not a URL)`);
      return INVALID;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      report(`${PROXY_EXPECTED} (the scheme ${shown(url.protocol)} is not supported)`);
      return INVALID;
    }
    if (url.hostname === '') {
      report(`${PROXY_EXPECTED} (no host)`);
      return INVALID;
    }
    if ((url.pathname !== '' && url.pathname !== '/') || url.search !== '' || url.hash !== '') {
      report(`${PROXY_EXPECTED} (nothing may follow host:port)`);
      return INVALID;
    }
    if (!decodes(url.username) || !decodes(url.password)) {
      report(
        `${PROXY_EXPECTED} (the user or password holds a % that is no percent-escape of UTF-8: write a literal % as %25)`,
      );
      return INVALID;
    }
    const port = url.port === '' ? (url.protocol === 'https:' ? '443' : '80') : url.port;
    const auth = url.username === '' ? '' : `${url.username}:${url.password}@`;
    return `${url.protocol}//${auth}${url.hostname}:${port}`;
  };
}

/** One parsed `NO_PROXY` entry. */
interface NoProxyEntry {
  /** Lower case, no leading dot, IPv6 without brackets; '' for `*`. */
  host: string;
  /** 0: any port. */
  port: number;
  /** For a CIDR entry (`10.0.0.0/8`): the range. */
  range?: BlockList;
}

const HOST_NAME =
  /^(?:[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*$/;

/** `entry` as curl reads it, or undefined when it is no host, domain, IP, CIDR or `*`. */
function parseEntry(entry: string): NoProxyEntry | undefined {
  if (entry === '*') return { host: '', port: 0 };
  let host = entry.toLowerCase();
  let port = 0;
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(host);
  const withPort = /^([^:]+):(\d{1,5})$/.exec(host);
  if (bracketed !== null) {
    host = bracketed[1]!;
    port = Number(bracketed[2] ?? 0);
  } else if (withPort !== null) {
    host = withPort[1]!;
    port = Number(withPort[2]);
  }
  if (port > 65_535) return undefined;
  host = host.replace(/^\*?\./, '');
  const cidr = /^(.+)\/(\d{1,3})$/.exec(host);
  if (cidr !== null) {
    const family = isIP(cidr[1]!);
    const bits = Number(cidr[2]);
    if (family === 0 || bits > (family === 4 ? 32 : 128)) return undefined;
    const range = new BlockList();
    range.addSubnet(cidr[1]!, bits, family === 4 ? 'ipv4' : 'ipv6');
    return { host, port, range };
  }
  return isIP(host) !== 0 || HOST_NAME.test(host) ? { host, port } : undefined;
}

/** `NO_PROXY`: comma (or space) separated hosts, domains, `host:port`, IP literals, CIDR, `*`. */
export function noProxy(): Parser<string[]> {
  return (raw, report) => {
    const items = typeof raw === 'string' ? raw.split(/[\s,]+/) : list()(raw, report);
    if (items === INVALID) return INVALID;
    const out: string[] = [];
    for (const item of items.map((entry) => entry.trim()).filter((entry) => entry !== '')) {
      if (parseEntry(item) === undefined) {
        report(
          `each entry must be a host, a domain (.corp.example), host:port, an IP address, a CIDR range or * (got ${shown(item)})`,
        );
      } else out.push(item.toLowerCase());
    }
    return out;
  };
}

/** True when `NO_PROXY`'s `entries` say `url` is reached directly. */
export function bypassesProxy(entries: readonly string[], url: URL): boolean {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const port = Number(url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : url.port);
  const family = isIP(host);
  for (const raw of entries) {
    const entry = parseEntry(raw);
    if (entry === undefined || (entry.port !== 0 && entry.port !== port)) continue;
    if (entry.host === '') return true;
    if (entry.range !== undefined) {
      if (family !== 0 && entry.range.check(host, family === 4 ? 'ipv4' : 'ipv6')) return true;
    } else if (host === entry.host) return true;
    else if (family === 0 && isIP(entry.host) === 0 && host.endsWith(`.${entry.host}`)) {
      return true;
    }
  }
  return false;
}

/** The proxy `origin` is reached through, or undefined for a direct connection. */
export function proxyFor(egress: EgressConfig, origin: string): string | undefined {
  const url = new URL(origin);
  const proxy = url.protocol === 'https:' ? egress.proxy : egress.httpProxy;
  if (proxy === undefined || bypassesProxy(egress.noProxy, url)) return undefined;
  return proxy;
}

/**
 * `http://user:password@proxy:3128` → `http://***@proxy:3128`: the whole user-info is a secret,
 * since many proxies take an API key as the user name with no password.
 */
export function shownProxy(proxy: string): string {
  try {
    const url = new URL(proxy);
    const auth = url.username === '' && url.password === '' ? '' : '***@';
    return `${url.protocol}//${auth}${url.host}`;
  } catch {
    return '(invalid proxy URL)';
  }
}

/**
 * The environment with curl's lower-case proxy variables folded into the upper-case ones, which
 * win when both are set.
 */
export function foldProxyVariables(
  env: Record<string, string | undefined>,
): Record<string, string | undefined> {
  const out = { ...env };
  for (const name of ['HTTPS_PROXY', 'HTTP_PROXY', 'NO_PROXY']) {
    const upper = env[name];
    const lower = env[name.toLowerCase()];
    if ((upper === undefined || upper.trim() === '') && lower !== undefined) out[name] = lower;
  }
  return out;
}

/**
 * What `/status` and the start-up line show of the egress proxy: the proxy without its user-info
 * and, for the API and the token endpoint, whether they go through it. Undefined without a proxy.
 */
export interface EgressSummary {
  proxy?: string;
  httpProxy?: string;
  noProxy: string[];
  /** `through <proxy>` or `direct`. */
  api: string;
  tokenEndpoint: string;
}

export function egressSummary(
  egress: EgressConfig,
  api: string,
  tokenUrl: string,
): EgressSummary | undefined {
  if (egress.proxy === undefined && egress.httpProxy === undefined) return undefined;
  const route = (url: string): string => {
    const proxy = proxyFor(egress, url);
    return proxy === undefined ? 'direct' : `through ${shownProxy(proxy)}`;
  };
  return {
    ...(egress.proxy !== undefined && { proxy: shownProxy(egress.proxy) }),
    ...(egress.httpProxy !== undefined && { httpProxy: shownProxy(egress.httpProxy) }),
    noProxy: egress.noProxy,
    api: route(api),
    tokenEndpoint: route(tokenUrl),
  };
}
