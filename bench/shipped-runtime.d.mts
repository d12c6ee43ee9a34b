// Types of bench/shipped-runtime.mjs for the tests that import it (through test/helpers/shipped-runtime.ts).
export declare function dockerEnv(name: string): string;
export declare function dockerEntrypointFlags(): string[];
export declare function shippedEnv(): Record<string, string>;
