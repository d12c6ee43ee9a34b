import type { OutgoingHttpHeaders } from 'node:http';

/**
 * How the proxy sees the token keeper (DESIGN.md: `{ getAccessToken(), invalidate(token) }`).
 * The keeper satisfies it structurally; proxy/ never imports token/.
 */
export interface AccessTokenSource {
  /** Resolves with a valid access token, or rejects with a SidecarError (`token_unavailable`). */
  getAccessToken(): Promise<string>;
  /**
   * The upstream answered 401 to `token`. If it is still the current token, it is dropped and a
   * renewal starts (at most one forced renewal per 5 s, never against backoff). Returns true when a
   * replay would not carry `token` again: it gets a newer token, waits for one, or is answered 503
   * `token_unavailable`.
   */
  invalidate(token: string): boolean;
}

/**
 * A look at an upstream answer on its way to the client (the response cache uses it). Absent on
 * the plain path, which then costs nothing.
 */
export interface AnswerTap {
  /**
   * The answer's status and client-facing headers, just before they are written. May add to
   * `headers`; returns a sink to receive a copy of the body, or undefined.
   */
  head(status: number, headers: OutgoingHttpHeaders): BodySink | undefined;
}

/** Receives the body of an answer while it streams to the client. */
export interface BodySink {
  chunk(data: Buffer): void;
  /** The whole body arrived. */
  end(): void;
  /** The answer was cut short (upstream failure, client gone); called at most once, never after end. */
  abort(): void;
}
