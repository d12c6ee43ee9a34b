/** "Did you mean": the known name nearest to a misspelt one (YAML keys and environment variables). */

/** Levenshtein distance: insertions, deletions and substitutions, one each. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/** The candidate nearest to `name` (case-insensitive) within `maxDistance` edits, if any. */
export function nearest(
  name: string,
  candidates: Iterable<string>,
  maxDistance: number,
): string | undefined {
  const lower = name.toLowerCase();
  let best: { key: string; distance: number } | undefined;
  for (const key of candidates) {
    const distance = editDistance(lower, key.toLowerCase());
    if (distance <= maxDistance && (best === undefined || distance < best.distance)) {
      best = { key, distance };
    }
  }
  return best?.key;
}
