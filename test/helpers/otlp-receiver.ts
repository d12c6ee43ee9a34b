/**
 * An OTLP/HTTP traces receiver for tests (docs/reference.md "Traces"): accepts
 * `POST /v1/traces` as protobuf or JSON and keeps every span, decoded to one plain shape. The
 * protobuf decoder reads only the fields of ExportTraceServiceRequest the tests look at
 * (opentelemetry-proto trace/v1/trace.proto, common/v1/common.proto).
 */
import { createServer, type Server } from 'node:http';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, string | number | boolean | string[]>;
  resource: Record<string, string | number | boolean | string[]>;
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Every request body as received (text for JSON, latin1 for protobuf): to grep for secrets. */
  raw: string[];
  contentTypes: string[];
  close(): Promise<void>;
}

type Fields = Map<number, (Buffer | number | bigint)[]>;

/** Protobuf wire format: field number → values (varint as number/bigint, length-delimited as Buffer). */
function fields(buf: Buffer): Fields {
  const out: Fields = new Map();
  let at = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = buf[at++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (at < buf.length) {
    const key = Number(varint());
    const field = key >>> 3;
    const wire = key & 7;
    let value: Buffer | number | bigint;
    if (wire === 0) value = varint();
    else if (wire === 1) {
      value = buf.readBigUInt64LE(at);
      at += 8;
    } else if (wire === 2) {
      const length = Number(varint());
      value = buf.subarray(at, at + length);
      at += length;
    } else if (wire === 5) {
      value = buf.readUInt32LE(at);
      at += 4;
    } else throw new Error(`unsupported wire type ${wire}`);
    const list = out.get(field) ?? [];
    list.push(value);
    out.set(field, list);
  }
  return out;
}

const bytes = (f: Fields, n: number): Buffer[] => (f.get(n) ?? []) as Buffer[];
const text = (f: Fields, n: number): string => bytes(f, n)[0]?.toString('utf8') ?? '';
const hex = (f: Fields, n: number): string => bytes(f, n)[0]?.toString('hex') ?? '';

function anyValue(buf: Buffer): string | number | boolean | string[] {
  const f = fields(buf);
  if (f.has(1)) return text(f, 1);
  if (f.has(2)) return (f.get(2)![0] as bigint) !== 0n;
  if (f.has(3)) return Number(f.get(3)![0]);
  if (f.has(4)) return Number((f.get(4)![0] as bigint) & 0xffffffffffffffffn);
  // array_value: ArrayValue { repeated AnyValue values = 1 }
  if (f.has(5)) return bytes(fields(bytes(f, 5)[0]!), 1).map((v) => String(anyValue(v)));
  return '';
}

function attributes(list: Buffer[]): Record<string, string | number | boolean | string[]> {
  const out: Record<string, string | number | boolean | string[]> = {};
  for (const kv of list) {
    const f = fields(kv);
    out[text(f, 1)] = anyValue(bytes(f, 2)[0] ?? Buffer.alloc(0));
  }
  return out;
}

function fromProtobuf(body: Buffer): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of bytes(fields(body), 1)) {
    const rs = fields(resourceSpans);
    const resource = attributes(bytes(fields(bytes(rs, 1)[0] ?? Buffer.alloc(0)), 1));
    for (const scopeSpans of bytes(rs, 2)) {
      for (const span of bytes(fields(scopeSpans), 2)) {
        const s = fields(span);
        spans.push({
          traceId: hex(s, 1),
          spanId: hex(s, 2),
          parentSpanId: hex(s, 4),
          name: text(s, 5),
          kind: Number((s.get(6)?.[0] as bigint | undefined) ?? 0n),
          attributes: attributes(bytes(s, 9)),
          resource,
        });
      }
    }
  }
  return spans;
}

interface JsonValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: JsonValue[] };
}

function jsonValue(v: JsonValue): string | number | boolean | string[] {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  return (v.arrayValue?.values ?? []).map((x) => String(jsonValue(x)));
}

function jsonAttributes(list: { key: string; value: JsonValue }[] = []) {
  return Object.fromEntries(list.map((kv) => [kv.key, jsonValue(kv.value)]));
}

function fromJson(body: Buffer): ReceivedSpan[] {
  const parsed = JSON.parse(body.toString('utf8')) as {
    resourceSpans: {
      resource?: { attributes?: { key: string; value: JsonValue }[] };
      scopeSpans: {
        spans: {
          traceId: string;
          spanId: string;
          parentSpanId?: string;
          name: string;
          kind: number;
          attributes?: { key: string; value: JsonValue }[];
        }[];
      }[];
    }[];
  };
  return parsed.resourceSpans.flatMap((rs) =>
    rs.scopeSpans.flatMap((ss) =>
      ss.spans.map((s) => ({
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ?? '',
        name: s.name,
        kind: s.kind,
        attributes: jsonAttributes(s.attributes),
        resource: jsonAttributes(rs.resource?.attributes),
      })),
    ),
  );
}

/**
 * `refuse`: the first this many exports are answered `status` (default 503, retryable) with
 * `Retry-After: retryAfter` seconds, their spans not kept.
 */
export async function startOtlpReceiver(
  options: { refuse?: number; retryAfter?: number; status?: number } = {},
): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const raw: string[] = [];
  const contentTypes: string[] = [];
  let refuse = options.refuse ?? 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const type = req.headers['content-type'] ?? '';
      contentTypes.push(type);
      const json = type.includes('json');
      raw.push(body.toString(json ? 'utf8' : 'latin1'));
      if (refuse > 0) {
        refuse -= 1;
        res
          .writeHead(options.status ?? 503, { 'retry-after': String(options.retryAfter ?? 1) })
          .end();
        return;
      }
      spans.push(...(json ? fromJson(body) : fromProtobuf(body)));
      res.writeHead(200, { 'content-type': type }).end(json ? '{}' : '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${address.port}`,
    spans,
    raw,
    contentTypes,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
