/**
 * The store URL (docs/configuration.md `STORE_URL`): `redis[s]://[user:password@]host:port[,host:port…][/db]`.
 * Several hosts in the authority, as libpq and MongoDB URLs take them: the seed nodes of a cluster
 * or the sentinels. One parser for the configuration (which reports what is wrong) and the store
 * (which connects to the nodes); the password never appears in what it returns for display.
 * Imports nothing internal.
 */

/** One host of the URL, as a one-host URL with the same scheme, credentials and path. */
export interface StoreUrlNode {
  url: string;
  host: string;
  /** The port written, or undefined when the URL names none. */
  port: number | undefined;
}

export interface StoreUrl {
  tls: boolean;
  username: string | undefined;
  password: string | undefined;
  /** The database number of the path (`/2`), if any. */
  db: number | undefined;
  nodes: StoreUrlNode[];
}

const SHAPE = /^(rediss?):\/\/([^/?#]*)(.*)$/s;

/** The parsed URL, or the reason it is not one (never quoting it: it may hold a password). */
export function parseStoreUrl(raw: string): StoreUrl | { problem: string } {
  const match = SHAPE.exec(raw.trim());
  if (match === null) return { problem: 'the scheme is neither' };
  const [, scheme, authority, rest] = match as unknown as [string, string, string, string];
  const at = authority.lastIndexOf('@');
  const userinfo = at === -1 ? '' : authority.slice(0, at + 1);
  const hosts = authority.slice(at + 1).split(',');
  const nodes: StoreUrlNode[] = [];
  let first: URL | undefined;
  for (const host of hosts) {
    if (host.trim() === '') return { problem: 'no host' };
    let url: URL;
    try {
      url = new URL(`${scheme}://${userinfo}${host}${rest}`);
    } catch {
      return { problem: `host ${nodes.length + 1} is not a host[:port]` };
    }
    if (url.hostname === '') return { problem: 'no host' };
    if (url.pathname !== '' && url.pathname !== '/' && !/^\/\d{1,2}$/.test(url.pathname)) {
      return { problem: 'the path may only name a database number, e.g. /0' };
    }
    first ??= url;
    nodes.push({
      url: url.href,
      host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: url.port === '' ? undefined : Number(url.port),
    });
  }
  const url = first!;
  return {
    tls: scheme === 'rediss',
    username: url.username === '' ? undefined : decodeURIComponent(url.username),
    password: url.password === '' ? undefined : decodeURIComponent(url.password),
    db: url.pathname.length > 1 ? Number(url.pathname.slice(1)) : undefined,
    nodes,
  };
}

/** `redis://user:secret@a:1,b:2/0` → `redis://user@a:1,b:2/0`: the password never leaves. */
export function redactStoreUrl(raw: string): string {
  const parsed = parseStoreUrl(raw);
  if ('problem' in parsed) return '(invalid URL)';
  const urls = parsed.nodes.map((node) => new URL(node.url));
  const user = urls[0]!.username === '' ? '' : `${urls[0]!.username}@`;
  const hosts = urls.map((url) => url.host);
  const db = parsed.db === undefined ? '' : `/${parsed.db}`;
  return `${parsed.tls ? 'rediss' : 'redis'}://${user}${hosts.join(',')}${db}`;
}
