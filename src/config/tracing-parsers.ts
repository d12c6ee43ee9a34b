/**
 * Parsers of the `tracing.*` keys: OpenTelemetry's own environment variables with their
 * specified meanings (docs/configuration.md "Tracing"). Headers may hold an API key: never echoed.
 */
import { shown } from '../safe-text.js';
import { INVALID, toNumber, type Parser, type Report } from './parsers.js';

/** An OTLP/HTTP endpoint: `http://` or `https://`, no credentials, no fragment. */
export function otlpEndpoint(): Parser<string> {
  return (raw, report) => {
    let url: URL;
    try {
      url = new URL(typeof raw === 'string' ? raw.trim() : '');
    } catch {
      report('must be an absolute http:// or https:// URL, e.g. http://localhost:4318');
      return INVALID;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      report(`must use http:// or https:// (got scheme ${shown(url.protocol)})`);
      return INVALID;
    }
    if (url.username !== '' || url.password !== '' || url.hash !== '') {
      report(
        'must not contain credentials or a fragment; put credentials in OTEL_EXPORTER_OTLP_HEADERS',
      );
      return INVALID;
    }
    return url.href;
  };
}

/** `key=value,...` with percent-encoded values (the OpenTelemetry list format). */
function keyValues(what: string, secret: boolean): Parser<Record<string, string>> {
  return (raw, report: Report) => {
    if (typeof raw !== 'string') {
      report(`must be ${what} as key=value,key=value`);
      return INVALID;
    }
    const out: Record<string, string> = {};
    let ok = true;
    for (const item of raw.split(',')) {
      if (item.trim() === '') continue;
      const at = item.indexOf('=');
      const key = at < 0 ? '' : item.slice(0, at).trim();
      let value: string | undefined;
      try {
        value = at < 0 ? undefined : decodeURIComponent(item.slice(at + 1).trim());
      } catch {
        value = undefined;
      }
      if (key === '' || value === undefined || !/^[\w.\-/]+$/.test(key)) {
        report(
          `each item must be key=value with a percent-encoded value${secret ? '' : ` (got ${shown(item)})`}`,
        );
        ok = false;
        continue;
      }
      out[secret ? key.toLowerCase() : key] = value;
    }
    return ok ? out : INVALID;
  };
}

/** `OTEL_EXPORTER_OTLP_HEADERS`: sent with every export; may hold an API key (secret). */
export function otlpHeaders(): Parser<Record<string, string>> {
  return keyValues('headers', true);
}

/** `OTEL_RESOURCE_ATTRIBUTES`. */
export function resourceAttributes(): Parser<Record<string, string>> {
  return keyValues('resource attributes', false);
}

/** `OTEL_TRACES_SAMPLER_ARG`: the ratio of `traceidratio` samplers, 0–1. */
export function samplerRatio(): Parser<number> {
  return (raw, report) => {
    const value = toNumber(raw);
    if (typeof value === 'number' && value >= 0 && value <= 1) return value;
    report(`must be a number from 0 to 1, e.g. 0.25 (got ${shown(raw)})`);
    return INVALID;
  };
}

export const SAMPLERS = [
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
  'always_on',
  'always_off',
  'traceidratio',
] as const;

export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
