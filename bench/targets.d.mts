export declare function needsStandin(
  targets: readonly string[],
  options: { footprint: boolean },
): boolean;
