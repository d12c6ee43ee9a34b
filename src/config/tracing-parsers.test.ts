import { describe, expect, it } from 'vitest';
import { ConfigError } from '../errors.js';
import { loadConfig } from './load.js';
import { parseValue } from './parsers.js';
import {
  OTLP_PROTOCOLS,
  SAMPLERS,
  otlpEndpoint,
  otlpHeaders,
  resourceAttributes,
  samplerRatio,
} from './tracing-parsers.js';

const API_KEY = 'otlp-api-key-5f0c';

describe('tracing endpoint', () => {
  it('takes an http:// or https:// URL', () => {
    expect(parseValue(otlpEndpoint(), ' http://localhost:4318 ')).toEqual({
      ok: true,
      value: 'http://localhost:4318/',
    });
  });

  it('refuses another scheme, credentials, a fragment and a non-URL, never echoing credentials', () => {
    expect(parseValue(otlpEndpoint(), 'grpc://collector:4317')).toEqual({
      ok: false,
      problems: ['must use http:// or https:// (got scheme "grpc:")'],
    });
    const withCredentials = parseValue(otlpEndpoint(), `https://u:${API_KEY}@collector`);
    expect(withCredentials).toEqual({
      ok: false,
      problems: [
        'must not contain credentials or a fragment; put credentials in OTEL_EXPORTER_OTLP_HEADERS',
      ],
    });
    expect(parseValue(otlpEndpoint(), 'https://collector/#x').ok).toBe(false);
    expect(parseValue(otlpEndpoint(), 'not a url')).toEqual({
      ok: false,
      problems: ['must be an absolute http:// or https:// URL, e.g. http://localhost:4318'],
    });
  });
});

describe('key=value lists', () => {
  it('decode percent-encoded values; header names are lower-cased', () => {
    expect(parseValue(otlpHeaders(), `X-Api-Key=${API_KEY},, b=a%20b`)).toEqual({
      ok: true,
      value: { 'x-api-key': API_KEY, b: 'a b' },
    });
    expect(parseValue(resourceAttributes(), 'service.namespace=Spark,deployment/env=prod')).toEqual(
      {
        ok: true,
        value: { 'service.namespace': 'Spark', 'deployment/env': 'prod' },
      },
    );
  });

  it('report every bad item; headers (which may hold an API key) are never echoed', () => {
    const headers = parseValue(otlpHeaders(), `key ${API_KEY},x=%zz${API_KEY},=${API_KEY}`);
    expect(headers).toEqual({
      ok: false,
      problems: Array(3).fill('each item must be key=value with a percent-encoded value'),
    });
    expect(JSON.stringify(headers)).not.toContain(API_KEY);
    expect(parseValue(resourceAttributes(), 'novalue')).toEqual({
      ok: false,
      problems: ['each item must be key=value with a percent-encoded value (got "novalue")'],
    });
    expect(parseValue(otlpHeaders(), ['a=b'])).toEqual({
      ok: false,
      problems: ['must be headers as key=value,key=value'],
    });
  });

  it('a bad header line names the setting and not the key', async () => {
    const error = await loadConfig({
      env: {
        UPSTREAM_BASE_URL: 'https://api.example.com',
        CLIENT_ID: 'id',
        CLIENT_SECRET: 'secret',
        OTEL_EXPORTER_OTLP_HEADERS: `api-key ${API_KEY}`,
      },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toContainEqual(
      expect.stringMatching(/^OTEL_EXPORTER_OTLP_HEADERS \(tracing\.headers\): each item/),
    );
    expect(JSON.stringify(problems)).not.toContain(API_KEY);
  });
});

describe('sampler', () => {
  it('takes a ratio from 0 to 1', () => {
    expect(parseValue(samplerRatio(), '0')).toEqual({ ok: true, value: 0 });
    expect(parseValue(samplerRatio(), '0.25')).toEqual({ ok: true, value: 0.25 });
    expect(parseValue(samplerRatio(), 1)).toEqual({ ok: true, value: 1 });
    for (const raw of ['1.5', '-0.1', 'half']) {
      expect(parseValue(samplerRatio(), raw)).toEqual({
        ok: false,
        problems: [`must be a number from 0 to 1, e.g. 0.25 (got "${raw}")`],
      });
    }
  });

  it('names the samplers and protocols of the OpenTelemetry specification', () => {
    expect(SAMPLERS).toContain('parentbased_traceidratio');
    expect(OTLP_PROTOCOLS).toEqual(['http/protobuf', 'http/json']);
  });
});
