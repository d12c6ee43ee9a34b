/** The start-up log lines (docs/reference.md "Logs"): configuration warnings, features, listening. */
import { featureLine, featuresInEffect } from './config/features.js';
import type { Config } from './config/types.js';
import type { Logger } from './telemetry/logger.js';
import { VERSION } from './version.js';

/** One warn line per configuration warning, then one line with the optional features in effect. */
export function logConfiguration(logger: Logger, config: Config): void {
  for (const warning of config.warnings ?? []) {
    logger.warn({ component: 'config' }, `configuration: ${warning}`);
  }
  logger.info(
    { component: 'config', features: featuresInEffect(config) },
    `features in effect: ${featureLine(config)}`,
  );
}

export function logListening(
  logger: Logger,
  config: Config,
  proxy: { host: string; port: number },
  admin: { host: string; port: number },
): void {
  logger.info(
    {
      proxy: `${proxy.host}:${proxy.port}`,
      admin: `${admin.host}:${admin.port}`,
      upstream: config.upstream.baseUrl,
      prefixes: config.upstream.pathPrefixes,
      tokenUrl: config.token.url,
      tokenFormat: config.token.format,
      version: VERSION,
    },
    'oauth-sidecar listening',
  );
}
