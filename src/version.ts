import { readFileSync } from 'node:fs';

// Set by the bundlers (scripts/bundle.mjs, scripts/sea.mjs) from package.json: the single
// executable has no package.json beside it. Unset where tsc's modules or the sources run.
declare const OAUTH_SIDECAR_BUILD_VERSION: string | undefined;

/** The package's version (package.json is its one source: scripts/bump-version.mjs). */
export const VERSION: string =
  typeof OAUTH_SIDECAR_BUILD_VERSION === 'string'
    ? OAUTH_SIDECAR_BUILD_VERSION
    : (
        JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
          version: string;
        }
      ).version;

/** The `User-Agent` of the sidecar's own requests (the token endpoint's grants). */
export const USER_AGENT = `oauth-sidecar/${VERSION}`;
