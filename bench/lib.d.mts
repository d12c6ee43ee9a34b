// Types of what the tests import from lib.mjs (the bench scripts themselves are plain JavaScript).
export declare function freePort(): Promise<number>;
export declare function freePorts(count: number): Promise<number[]>;
