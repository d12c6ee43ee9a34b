/**
 * The `callers` settings (docs/configuration.md "Caller identity"): the cross-key rules of
 * `callers.auth: jwt` — an issuer, one source of keys, rules inside the forwarded prefixes, no
 * `quota.callerHeader` beside it — every problem at once, and the config object built from them.
 */
import { describeRule } from './caller-parsers.js';
import { label, type FieldKey, type ResolvedValues } from './schema.js';
import type { CallerKeySource, CallersConfig } from './types.js';

type Get = <K extends FieldKey>(key: K) => ResolvedValues[K];

const JWT_ONLY: FieldKey[] = [
  'callers.jwt.issuer',
  'callers.jwt.jwksUrl',
  'callers.jwt.jwksFile',
  'callers.jwt.caFile',
  'callers.jwt.bearerFile',
  'callers.rules',
];

/** Every inconsistency of the `callers` settings with each other and with the proxy's. */
export function checkCallers(get: Get, invalid: ReadonlySet<FieldKey>, problems: string[]): void {
  if (invalid.has('callers.auth')) return;
  if (get('callers.auth') === 'none') {
    for (const key of JWT_ONLY) {
      if (get(key) !== undefined && !(key === 'callers.rules' && get(key).length === 0)) {
        problems.push(`${label(key)}: applies only with ${label('callers.auth')} jwt (it is none)`);
      }
    }
    return;
  }
  const jwt = `${label('callers.auth')} is jwt`;
  if (get('quota.callerHeader') !== undefined) {
    problems.push(
      `${label('quota.callerHeader')}: cannot be combined with ${jwt}: the verified caller's rule names the quota caller, a header would let any caller claim another's name; remove ${label('quota.callerHeader')}`,
    );
  }
  if (get('callers.jwt.issuer') === undefined && !invalid.has('callers.jwt.issuer')) {
    problems.push(
      `${label('callers.jwt.issuer')}: required with ${jwt}, e.g. https://kubernetes.default.svc.cluster.local`,
    );
  }
  if (get('callers.jwt.jwksUrl') !== undefined && get('callers.jwt.jwksFile') !== undefined) {
    problems.push(
      `${label('callers.jwt.jwksFile')}: set beside ${label('callers.jwt.jwksUrl')}; keep one source of keys`,
    );
  }
  if (get('callers.jwt.jwksFile') !== undefined) {
    for (const key of ['callers.jwt.caFile', 'callers.jwt.bearerFile'] as const) {
      if (get(key) !== undefined) {
        problems.push(
          `${label(key)}: applies to a JWKS fetched over https, not to ${label('callers.jwt.jwksFile')}`,
        );
      }
    }
  }
  if (invalid.has('callers.rules') || invalid.has('upstream.pathPrefixes')) return;
  const prefixes = get('upstream.pathPrefixes');
  get('callers.rules').forEach((rule, i) => {
    for (const path of rule.paths ?? []) {
      if (!prefixes.some((prefix) => path.startsWith(prefix))) {
        problems.push(
          `${label('callers.rules')}: rule ${i + 1} (${describeRule(rule)}): the path ${JSON.stringify(path)} lies outside every forwarded prefix (${prefixes.join(', ')})`,
        );
      }
    }
  });
}

/** The `callers` config once `checkCallers` found nothing wrong. */
export function callersConfig(get: Get): CallersConfig {
  if (get('callers.auth') === 'none') return { auth: 'none' };
  const url = get('callers.jwt.jwksUrl');
  const file = get('callers.jwt.jwksFile');
  const keys: CallerKeySource =
    file !== undefined
      ? { kind: 'file', file }
      : url !== undefined
        ? { kind: 'url', url }
        : { kind: 'discovery' };
  return {
    auth: 'jwt',
    jwt: {
      issuer: get('callers.jwt.issuer') ?? '',
      audience: get('callers.jwt.audience'),
      keys,
      caFile: get('callers.jwt.caFile'),
      bearerFile: get('callers.jwt.bearerFile'),
    },
    rules: get('callers.rules'),
  };
}
