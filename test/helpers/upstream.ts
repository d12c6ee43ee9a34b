/** A bare HTTPS upstream for the limit tests: counts its connections and lets a test answer. */
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { Socket } from 'node:net';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { request, type Dispatcher } from 'undici';
import type { TestPki } from '../../src/standin/index.js';

export interface CountingUpstream {
  url: string;
  /** TLS connections accepted so far. */
  connections: number;
  /** Connections open now, and the most that were open at once. */
  open: number;
  maxOpen: number;
  /** Requests received so far, and the most that were in progress at once. */
  requests: number;
  inProgress: number;
  maxInProgress: number;
  /**
   * Client-side TCP connections to this upstream in ESTABLISHED state, as the kernel sees them
   * now. Unlike `open`, it does not lag behind while this process is too busy to handle a close:
   * a connection the client dropped leaves ESTABLISHED at once. Only the sockets process `pid`
   * holds: in a parallel test run another process's client may reach this port too (a port a
   * closed server of another test had, which its sidecar still dials). Every process's when
   * `pid` is undefined.
   */
  establishedClients(pid: number | undefined): number;
  close(): Promise<void>;
}

/** The inodes of the sockets process `pid` holds open (`/proc/<pid>/fd`). */
function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match !== null) inodes.add(match[1]!);
    } catch {
      // closed between the listing and the readlink
    }
  }
  return inodes;
}

/**
 * ESTABLISHED IPv4 sockets of process `pid` whose remote port is `port` (`/proc/net/tcp`: state
 * 01, inode in the tenth column).
 */
function establishedTo(port: number, pid: number | undefined): number {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = pid === undefined ? undefined : socketInodes(pid);
  let count = 0;
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (
      fields[2]?.endsWith(`:${hexPort}`) === true &&
      fields[3] === '01' &&
      (inodes === undefined || inodes.has(fields[9]!))
    ) {
      count += 1;
    }
  }
  return count;
}

/**
 * What the kernel holds for the established IPv4 TCP sockets with these ports (and of process
 * `pid`), summed (`/proc/net/tcp`'s tx_queue:rx_queue): bytes not yet taken by the peer (`tx`),
 * and bytes received that their process has not read (`rx`).
 */
export function kernelQueues(match: { localPort?: number; remotePort?: number; pid?: number }): {
  tx: number;
  rx: number;
} {
  const port = (n: number | undefined) =>
    n === undefined ? '' : `:${n.toString(16).toUpperCase().padStart(4, '0')}`;
  const inodes = match.pid === undefined ? undefined : socketInodes(match.pid);
  const sum = { tx: 0, rx: 0 };
  for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (
      fields[1]?.endsWith(port(match.localPort)) === true &&
      fields[2]?.endsWith(port(match.remotePort)) === true &&
      fields[3] === '01' &&
      (inodes === undefined || inodes.has(fields[9]!))
    ) {
      const [tx = 0, rx = 0] = (fields[4] ?? '').split(':').map((n) => parseInt(n, 16));
      sum.tx += tx;
      sum.rx += rx;
    }
  }
  return sum;
}

export async function startCountingUpstream(
  pki: TestPki,
  answer: (req: IncomingMessage, res: ServerResponse, done: () => void) => void,
): Promise<CountingUpstream> {
  const sockets = new Set<Socket>();
  const state = {
    url: '',
    connections: 0,
    open: 0,
    maxOpen: 0,
    requests: 0,
    inProgress: 0,
    maxInProgress: 0,
    establishedClients: (_pid: number | undefined): number => 0,
    close: (): Promise<void> => Promise.resolve(),
  };
  const server: Server = createServer(
    { cert: pki.serverCert, key: pki.serverKey, keepAlive: true },
    (req, res) => {
      state.requests += 1;
      state.inProgress += 1;
      state.maxInProgress = Math.max(state.maxInProgress, state.inProgress);
      let done = false;
      answer(req, res, () => {
        if (done) return;
        done = true;
        state.inProgress -= 1;
      });
    },
  );
  server.on('secureConnection', (socket: Socket) => {
    state.connections += 1;
    state.open += 1;
    state.maxOpen = Math.max(state.maxOpen, state.open);
    sockets.add(socket);
    socket.once('close', () => {
      state.open -= 1;
      sockets.delete(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  state.url = `https://127.0.0.1:${port}`;
  state.establishedClients = (pid: number | undefined) => establishedTo(port, pid);
  state.close = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    });
  return state;
}

/** A TLS server that answers every request with the same raw bytes (framing a client must survive). */
export async function startRawUpstream(
  pki: TestPki,
  rawAnswer: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<TLSSocket>();
  const server = createTlsServer({ cert: pki.serverCert, key: pki.serverKey }, (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let buffered = '';
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('latin1');
      while (buffered.includes('\r\n\r\n')) {
        buffered = buffered.slice(buffered.indexOf('\r\n\r\n') + 4);
        socket.write(rawAnswer);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `https://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * The statuses of `count` GETs of `url` sent at once through `dispatcher`, bodies read: for tests
 * of a pool's connection limit.
 */
export function statusesOfGets(url: string, dispatcher: Dispatcher, count = 10): Promise<number[]> {
  return Promise.all(
    Array.from({ length: count }, () =>
      request(url, { dispatcher }).then(async (res) => {
        await res.body.dump();
        return res.statusCode;
      }),
    ),
  );
}

/**
 * 20 GETs of `url` at once and, once one has failed (a connection attempt the test made fail), 20
 * more: requests wait in the pool when an attempt fails, and more come after it. How many failed.
 */
export async function getsAcrossAFailure(url: string, dispatcher: Dispatcher): Promise<number> {
  let failed = 0;
  let firstFailure: () => void = () => undefined;
  const failedOnce = new Promise<void>((resolve) => (firstFailure = resolve));
  const get = () =>
    request(url, { dispatcher }).then(
      (answer) => answer.body.text(),
      () => {
        failed += 1;
        firstFailure();
      },
    );
  const first = Array.from({ length: 20 }, get);
  await failedOnce;
  await Promise.all([...first, ...Array.from({ length: 20 }, get)]);
  return failed;
}
