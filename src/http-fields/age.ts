/**
 * `Age` (RFC 9111 §5.1): the seconds a cache upstream already held an answer. Delta-seconds only;
 * anything else (a list, a sign, a fraction) is ignored as the RFC says a cache should.
 */
import type { HeaderValue } from './retry-after.js';

/** Longest age taken (RFC 9111 §1.2.2: at least 2^31 seconds, more is read as that). */
const MAX_AGE_SECONDS = 2 ** 31;

/** The answer's `Age` in whole seconds; 0 when absent or invalid. */
export function ageSeconds(value: HeaderValue): number {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || !/^\s*\d{1,15}\s*$/.test(text)) return 0;
  return Math.min(MAX_AGE_SECONDS, Number(text));
}
