// Types of bench/tinyproxy.mjs for the tests that import it (through test/helpers/tinyproxy.ts).
export declare const TINYPROXY_BIN: string;

export interface TinyproxyOptions {
  /** `BasicAuth` credentials; none: the proxy asks for none. */
  user?: string;
  password?: string;
  /** Ports `CONNECT` may reach (`ConnectPort`); others are answered 403. */
  connectPorts: number[];
  /** Where its configuration and log go (default: a new temp dir). */
  dir?: string;
}

export interface Tinyproxy {
  readonly port: number;
  /** `http://[user:password@]127.0.0.1:PORT` with the given (default: configured) credentials. */
  url(credentials?: { user: string; password: string }): string;
  /** The proxy's own log so far. */
  log(): string;
  /** The `CONNECT` targets in its log, in order (`127.0.0.1:443`). */
  tunnels(): string[];
  /** Stop (SIGTERM, SIGKILL after 5 s); the port stays reserved for `start()`. */
  stop(): Promise<void>;
  /** Start again on the same port. */
  start(): Promise<void>;
  close(): Promise<void>;
}

/** Start `tinyproxy -d` on a free 127.0.0.1 port and wait until it accepts connections. */
export declare function startTinyproxy(options: TinyproxyOptions): Promise<Tinyproxy>;
