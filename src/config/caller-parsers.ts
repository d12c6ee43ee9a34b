/**
 * The `callers.*` keys (docs/configuration.md "Caller identity"): how a shared gateway's callers
 * prove who they are (`callers.auth`, `callers.jwt.*`) and what each may do (`callers.rules`).
 * Cross-key rules (a rule's paths inside `upstream.pathPrefixes`, `quota.callerHeader` beside
 * `jwt`, where the keys come from) are in `checkCallers`, every problem reported at once.
 */
import { shown } from '../safe-text.js';
import { CALLER_NAME } from './quota-parsers.js';
import { INVALID, pipe, text, type Parser, type Report } from './parsers.js';
import type { CallerRule } from './types.js';

export const CALLER_AUTHS = ['none', 'jwt'] as const;

/** Most rules `callers.rules` may hold: each is matched in order on a verified caller's first request. */
export const MAX_CALLER_RULES = 500;

/** Methods a rule may name (the ones the proxy forwards). */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** A JWT `sub` (or a prefix of one ending in `*`): printable, no spaces, bounded. */
const SUBJECT = /^[\x21-\x7e]{1,253}$/;

/** `callers.jwt.issuer`: the `iss` required, also the base of the discovery document: https only. */
export function issuer(): Parser<string> {
  return pipe(text('the issuer URL, e.g. https://kubernetes.default.svc.cluster.local'), httpsUrl);
}

/** `callers.jwt.jwksUrl`: an https:// URL (the keys are trusted only over verified TLS). */
export function jwksUrl(): Parser<string> {
  return pipe(text('an https:// URL of a JWKS'), httpsUrl);
}

function httpsUrl(raw: string, report: Report): string | typeof INVALID {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    report(`must be an absolute https:// URL (got ${shown(raw)})`);
    return INVALID;
  }
  if (url.protocol !== 'https:') {
    report(`must use https:// (got scheme ${shown(url.protocol)})`);
    return INVALID;
  }
  if (url.username !== '' || url.password !== '') {
    report('must not contain credentials (user:password@); use callers.jwt.bearerFile');
    return INVALID;
  }
  return raw;
}

/** One rule as written: env `SUBJECT=CALLER[ METHODS[ PATHS]]`, YAML `{subject, caller, methods, paths}`. */
interface RawRule {
  subject: unknown;
  caller: unknown;
  methods: unknown;
  paths: unknown;
}

function rawRule(item: unknown, where: string, report: Report): RawRule | undefined {
  if (typeof item === 'string') {
    const match = /^([^=\s]*)=(\S*)(?:\s+(\S+))?(?:\s+(\S+))?\s*$/.exec(item.trim());
    if (match === null) {
      report(`${where}: must be SUBJECT=CALLER[ METHODS[ PATHS]] (got ${shown(item)})`);
      return undefined;
    }
    return {
      subject: match[1],
      caller: match[2],
      methods: match[3]?.split('|') ?? ['*'],
      paths: match[4]?.split('|'),
    };
  }
  if (typeof item === 'object' && item !== null && !Array.isArray(item)) {
    const { subject, caller, methods = ['*'], paths, ...rest } = item as Record<string, unknown>;
    const extra = Object.keys(rest);
    if (extra.length > 0) {
      report(
        `${where}: has only subject, caller, methods and paths (unknown: ${extra.join(', ')})`,
      );
      return undefined;
    }
    return { subject, caller, methods: typeof methods === 'string' ? [methods] : methods, paths };
  }
  report(
    `${where}: must be SUBJECT=CALLER[ METHODS[ PATHS]] or a mapping {subject, caller, methods, paths}`,
  );
  return undefined;
}

function stringList(value: unknown): string[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value.every((v) => typeof v === 'string') ? value.map((v) => v.trim()) : undefined;
}

/** The rule at `where`, every problem of it reported. */
function callerRule(item: unknown, where: string, report: Report): CallerRule | undefined {
  const raw = rawRule(item, where, report);
  if (raw === undefined) return undefined;
  let ok = true;
  const { subject } = raw;
  if (
    typeof subject !== 'string' ||
    !SUBJECT.test(subject) ||
    (subject.includes('*') && subject.indexOf('*') !== subject.length - 1)
  ) {
    report(
      `${where}: the subject must be a token subject (sub), or a prefix of one ending in * (got ${shown(subject)})`,
    );
    ok = false;
  }
  const caller = typeof raw.caller === 'string' ? raw.caller.trim().toLowerCase() : raw.caller;
  if (typeof caller !== 'string' || !CALLER_NAME.test(caller)) {
    report(
      `${where}: the caller must be 1 to 64 of a-z, 0-9, ".", "_", "-" (got ${shown(raw.caller)})`,
    );
    ok = false;
  }
  const methods = stringList(raw.methods)?.map((m) => m.toUpperCase());
  const anyMethod = methods?.length === 1 && methods[0] === '*';
  if (
    methods === undefined ||
    methods.length === 0 ||
    (!anyMethod && !methods.every((m) => METHODS.has(m)))
  ) {
    report(
      `${where}: methods must be * or |-joined methods such as GET|HEAD (got ${shown(raw.methods)})`,
    );
    ok = false;
  }
  const paths = raw.paths === undefined ? undefined : stringList(raw.paths);
  if (
    raw.paths !== undefined &&
    (paths === undefined || paths.length === 0 || !paths.every((p) => p.startsWith('/')))
  ) {
    report(
      `${where}: paths must be |-joined path prefixes starting with / (got ${shown(raw.paths)})`,
    );
    ok = false;
  }
  if (!ok) return undefined;
  const prefix = (subject as string).endsWith('*');
  return {
    subject: prefix ? (subject as string).slice(0, -1) : (subject as string),
    match: prefix ? 'prefix' : 'exact',
    caller: caller as string,
    methods: anyMethod ? undefined : methods,
    paths,
  };
}

/**
 * `callers.rules`: env rules joined by `;`, YAML a list of mappings (or of env-style strings).
 * Every rule's every problem is reported, each naming the rule's position (1-based).
 */
export function callerRules(): Parser<CallerRule[]> {
  return (raw, report) => {
    const items =
      typeof raw === 'string'
        ? raw
            .split(';')
            .map((item) => item.trim())
            .filter((item) => item !== '')
        : Array.isArray(raw)
          ? (raw as unknown[])
          : null;
    if (items === null) {
      report(
        'must be SUBJECT=CALLER[ METHODS[ PATHS]] rules joined by ; or a YAML list of {subject, caller, methods, paths}',
      );
      return INVALID;
    }
    if (items.length > MAX_CALLER_RULES) {
      report(`holds ${items.length} rules; at most ${MAX_CALLER_RULES}`);
      return INVALID;
    }
    const rules: CallerRule[] = [];
    let ok = true;
    items.forEach((item, i) => {
      const rule = callerRule(item, `rule ${i + 1}`, report);
      if (rule === undefined) ok = false;
      else rules.push(rule);
    });
    return ok ? rules : INVALID;
  };
}

/** The rule as an operator wrote it (for problems and the start-up line). */
export function describeRule(rule: CallerRule): string {
  const methods = rule.methods?.join('|') ?? '*';
  const paths = rule.paths === undefined ? '' : ` ${rule.paths.join('|')}`;
  return `${rule.subject}${rule.match === 'prefix' ? '*' : ''}=${rule.caller} ${methods}${paths}`;
}
