/** The embedded stand-in of the commodities API (docs/design.md "Module boundaries": used by `demo` and by the tests). */
export { createTestPki } from './pki.js';
export { startStandin } from './server.js';
export { SAMPLE_CONTRACTS } from './api.js';
export type * from './types.js';
