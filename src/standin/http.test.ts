import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { manualClock } from '../../test/helpers/manual-clock.js';
import { useHttpsServers } from '../../test/helpers/https-servers.js';
import {
  envelope,
  hashBody,
  readSmallBody,
  resetRequest,
  sendJson,
  streamBytes,
  Timers,
  type Req,
  type Res,
} from './http.js';

const servers = useHttpsServers();

/** A real HTTPS server on 127.0.0.1, port 0, answering with `handle`. */
async function serve(handle: (req: Req, res: Res) => void | Promise<void>): Promise<string> {
  const upstream = await servers.start((req, res, done) => {
    void Promise.resolve(handle(req, res)).finally(done);
  });
  return upstream.url;
}

describe('Timers', () => {
  const response = (): Res => new EventEmitter() as unknown as Res;

  it('runs a callback when the injected clock reaches it', () => {
    const clock = manualClock();
    const timers = new Timers(clock);
    const fired: string[] = [];
    timers.after(100, response(), () => fired.push('a'));
    timers.after(50, response(), () => fired.push('b'));
    clock.advance(99);
    expect(fired).toEqual(['b']);
    clock.advance(1);
    expect(fired).toEqual(['b', 'a']);
    expect(clock.pending()).toBe(0);
  });

  it('drops a callback whose response closed first, and every one on clearAll', () => {
    const clock = manualClock();
    const timers = new Timers(clock);
    const fired: string[] = [];
    const closing = response();
    timers.after(10, closing, () => fired.push('closed'));
    (closing as unknown as EventEmitter).emit('close');
    timers.after(10, response(), () => fired.push('cleared'));
    timers.clearAll();
    clock.advance(1_000);
    expect(fired).toEqual([]);
    expect(clock.pending()).toBe(0);
  });
});

describe('over the wire', () => {
  it('sendJson writes the JSON with its length; the envelope is the API’s', async () => {
    const url = await serve((_req, res) =>
      sendJson(res, 418, envelope('teapot', 'short and stout'), { 'x-extra': '1' }),
    );
    const res = await request(url, { dispatcher: servers.agent() });
    expect(res.statusCode).toBe(418);
    expect(res.headers).toMatchObject({
      'content-type': 'application/json; charset=utf-8',
      'x-extra': '1',
    });
    expect(await res.body.json()).toEqual({
      errors: [{ code: 'teapot', detail: 'short and stout' }],
    });
    const empty = await request(await serve((_req, res) => sendJson(res, 302, undefined)), {
      dispatcher: servers.agent(),
    });
    expect([empty.headers['content-type'], empty.headers['content-length']]).toEqual([
      undefined,
      '0',
    ]);
    await empty.body.dump();
  });

  it('readSmallBody keeps up to the limit, says when more came, and drains the rest', async () => {
    const url = await serve(async (req, res) => {
      const read = await readSmallBody(req, 1_000);
      sendJson(res, 200, { bytes: read?.body.length, tooLarge: read?.tooLarge });
    });
    const post = async (bytes: number) =>
      (
        await request(url, { method: 'POST', body: 'x'.repeat(bytes), dispatcher: servers.agent() })
      ).body.json();
    expect(await post(1_000)).toEqual({ bytes: 1_000, tooLarge: false });
    expect(await post(200_000)).toMatchObject({ tooLarge: true });
  });

  it('hashBody hashes what streamed by', async () => {
    const url = await serve(async (req, res) => sendJson(res, 200, await hashBody(req)));
    const body = Buffer.alloc(300_000, 7);
    const res = await request(url, { method: 'POST', body, dispatcher: servers.agent() });
    expect(await res.body.json()).toEqual({
      bytes: body.length,
      sha256: createHash('sha256').update(body).digest('hex'),
    });
  });

  it('streamBytes sends exactly the bytes asked for, then the tail', async () => {
    const chunk = Buffer.from('0123456789');
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-length': 2_000_003 });
      streamBytes(res, 2_000_000, chunk, Buffer.from('end'));
    });
    const body = Buffer.from(
      await (await request(url, { dispatcher: servers.agent() })).body.arrayBuffer(),
    );
    expect(body.length).toBe(2_000_003);
    expect(body.subarray(0, 12).toString()).toBe('012345678901');
    expect(body.subarray(-5).toString()).toBe('89end');
  });

  it('resetRequest ends the connection without an answer', async () => {
    const url = await serve((req) => resetRequest(req));
    await expect(request(url, { dispatcher: servers.agent() })).rejects.toThrow(
      /other side closed|socket/i,
    );
  });
});
