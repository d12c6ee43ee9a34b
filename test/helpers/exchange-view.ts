/**
 * A hand-made request and response for unit tests of the request path's stages (proxy/stages.ts):
 * the parts of node's objects the stages use, with the client's leaving under the test's control.
 */
import { EventEmitter } from 'node:events';
import type { OutgoingHttpHeaders } from 'node:http';
import type { ClientResponse } from '../../src/proxy/outcome.js';
import type { ClientRequest } from '../../src/proxy/request-body.js';
import type { ExchangeView } from '../../src/proxy/stages.js';

export class FakeResponse extends EventEmitter {
  status = 0;
  headers: OutgoingHttpHeaders = {};
  chunks: Buffer[] = [];
  destroyed = false;
  writableFinished = false;
  headersSent = false;
  setHeader(name: string, value: string): this {
    this.headers[name.toLowerCase()] = value;
    return this;
  }
  writeHead(status: number, headers: OutgoingHttpHeaders = {}): this {
    this.status = status;
    this.headers = { ...this.headers, ...headers };
    this.headersSent = true;
    return this;
  }
  write(chunk: Buffer): boolean {
    this.chunks.push(chunk);
    return true;
  }
  /** Like node's response: 'close' follows the end of the answer. */
  end(chunk?: Buffer): this {
    if (chunk) this.chunks.push(chunk);
    this.writableFinished = true;
    queueMicrotask(() => this.emit('close'));
    return this;
  }
  /** The client goes away. */
  leave(): void {
    this.destroyed = true;
    this.emit('close');
  }
  get body(): string {
    return Buffer.concat(this.chunks).toString();
  }
}

export interface FakeRequest {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  requestId?: string;
}

/** An exchange for `request` answered on `res` (a fresh FakeResponse unless given). */
export function exchangeView(
  request: FakeRequest,
  res: FakeResponse = new FakeResponse(),
): ExchangeView & { res: ClientResponse; fake: FakeResponse } {
  const method = request.method ?? 'GET';
  const headers = request.headers ?? {};
  const req = { url: request.url, method, headers, rawHeaders: Object.entries(headers).flat() };
  return {
    req: req as unknown as ClientRequest,
    res: res as unknown as ClientResponse,
    fake: res,
    requestId: request.requestId ?? 'r1',
    method,
    target: request.url,
    clientGone: () => res.destroyed,
    trace: undefined,
    keepAlive: undefined,
  };
}
