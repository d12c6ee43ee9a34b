export declare function measureWindows<T, R>(
  targets: readonly T[],
  parts: { cpu: (target: T) => number; load: (target: T) => Promise<R>; together?: boolean },
): Promise<{ result: R; cpu: number }[]>;
