/**
 * Connection-specific fields (RFC 9110 §7.6.1): what a proxy never forwards in either direction.
 */

/** The hop-by-hop fields, plus the legacy ones RFC 9110 §7.6.1 names. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'te',
  'transfer-encoding',
  'upgrade',
]);

/** Field names listed in `Connection` values (RFC 9110 §7.6.1: those are hop-by-hop too). */
export function connectionListed(values: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const value of values) {
    for (const token of value.split(',')) {
      const name = token.trim().toLowerCase();
      if (name) names.add(name);
    }
  }
  return names;
}
