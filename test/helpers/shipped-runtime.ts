/**
 * The container image's runtime settings (bench/shipped-runtime.mjs reads them from the
 * Dockerfile): tests whose figures are about memory under load run the bundle with them, as the
 * image does.
 */
import { dockerEntrypointFlags, shippedEnv } from '../../bench/shipped-runtime.mjs';

/** The environment the image sets for node: `NODE_OPTIONS` (the heap caps), `GLIBC_TUNABLES`. */
export const SHIPPED_ENV: Record<string, string> = shippedEnv();

/** The ENTRYPOINT's node flags: V8 flags NODE_OPTIONS refuses. */
export const SHIPPED_NODE_FLAGS: readonly string[] = dockerEntrypointFlags();
