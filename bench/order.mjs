// The order of the targets in a bench round, kept apart from run.mjs so that a test can hold it.

/**
 * Round `r`'s order: rotated by every second round, and reversed in every odd one. Over 2 × n
 * rounds each of n targets runs in each place equally often, so neither the first nor the last
 * slot of a round (the machine's state after a pause, or after another target's load) biases a
 * pair. With two targets: A B, B A, B A, A B, and so on. (Rotating by the round itself, and
 * reversing every other round, gave two targets the same order in every round.)
 */
export function roundOrder(targets, r) {
  const shift = Math.floor(r / 2) % targets.length;
  const rotated = targets.map((_, i) => targets[(i + shift) % targets.length]);
  return r % 2 === 1 ? rotated.reverse() : rotated;
}
