export declare function roundOrder<T>(targets: readonly T[], r: number): T[];
