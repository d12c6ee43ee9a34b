import type { Http2Bindings, HttpBindings } from '@hono/node-server';
import type { ForwardOutcome } from '../proxy/forwarder.js';

/** Hono environment of the proxy app: node bindings plus what the middlewares share. */
export interface ProxyEnv {
  Bindings: HttpBindings | Http2Bindings;
  Variables: {
    requestId: string;
    /** Set once the forwarder has taken over the response. */
    outcome?: ForwardOutcome;
  };
}
