import type { IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';

/**
 * The request target exactly as it arrived. The server remembers it before the node adapter
 * parses the URL (which refuses some unsafe targets with a bare 400 and normalises others), so
 * the proxy app can judge the raw target and answer in the error envelope.
 */
const rawTargets = new WeakMap<object, string>();

/** Target the adapter is handed instead of an unsafe one; the app still judges the raw one. */
export const PLACEHOLDER_TARGET = '/';

export function rememberRawTarget(req: IncomingMessage | Http2ServerRequest, target: string): void {
  rawTargets.set(req, target);
}

export function rawTargetOf(req: IncomingMessage | Http2ServerRequest): string {
  return rawTargets.get(req) ?? req.url ?? '';
}
