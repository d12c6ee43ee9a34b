/**
 * The tests' forward proxy: Debian's `tinyproxy` on a free loopback port (bench/tinyproxy.mjs,
 * shared with the soak's egress phase), its files in a temp dir the test run removes.
 */
import {
  startTinyproxy as start,
  type Tinyproxy,
  type TinyproxyOptions,
} from '../../bench/tinyproxy.mjs';
import { tempDir } from './sidecar-process.js';

export { TINYPROXY_BIN, type Tinyproxy, type TinyproxyOptions } from '../../bench/tinyproxy.mjs';

export function startTinyproxy(options: TinyproxyOptions): Promise<Tinyproxy> {
  return start({ dir: tempDir('oauth-sidecar-tinyproxy-'), ...options });
}
