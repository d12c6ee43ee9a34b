/**
 * undici's own Pool, Agent and connector modules, imported by path so that the serving process does not
 * load undici's index (fetch, WebSocket, EventSource, cache stores, mock agents: idle RSS it never
 * uses; docs/benchmarks.md "Footprint"). undici has no `exports` map, so the paths resolve; they
 * are the very classes `require('undici')` exports, which `src/proxy/dispatcher.test.ts` checks
 * (`===`) so that an upgrade that moves them fails there. package.json pins undici to `~7.30`.
 */
declare module 'undici/lib/dispatcher/pool.js' {
  import { Pool } from 'undici';
  export default Pool;
}

declare module 'undici/lib/dispatcher/agent.js' {
  import { Agent } from 'undici';
  export default Agent;
}

declare module 'undici/lib/core/connect.js' {
  import { buildConnector } from 'undici';
  export default buildConnector;
}
