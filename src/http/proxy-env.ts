import type { Http2Bindings, HttpBindings } from '@hono/node-server';

/** Hono environment of the proxy app: the node bindings. */
export interface ProxyEnv {
  Bindings: HttpBindings | Http2Bindings;
  Variables: {
    requestId?: string;
  };
}
