// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const honoOnlyInHttp = {
  group: ['hono', 'hono/*', '@hono/*'],
  message:
    'Only src/http/ may import Hono (docs/design.md "Module boundaries"); keep the rest framework-free and testable.',
};

const redisOnlyInStore = {
  group: ['redis', '@redis/*', 'ioredis'],
  message:
    'Only src/fleet/ imports the Redis client (docs/design.md "Module boundaries"); use the StoreConnection / TokenSetStore interfaces.',
};

/**
 * undici through its public exports only. Its modules by path are an exception with a measured
 * gain (docs/design.md "Exceptions"), allowed only in the files that table names:
 * UNDICI_BY_PATH. test/undici-imports.test.ts runs this rule on fixtures.
 */
const undiciInternals = {
  group: ['undici/lib', 'undici/lib/**'],
  message:
    "Import undici's public exports ('undici'): its modules by path only where docs/design.md \"Exceptions\" lists them.",
};

/** The files docs/design.md "Exceptions" lets import undici by module path (and their guard). */
export const UNDICI_BY_PATH = [
  'src/proxy/dispatcher.ts',
  'src/proxy/connection-cap.ts',
  'src/proxy/dispatcher.test.ts',
];

const proxySeesNoKeeper = {
  group: ['../token/*', '../token', '../http/*', '../http'],
  message:
    'proxy/ sees the keeper only as { getAccessToken(), invalidate(token) } (proxy/types.ts); no Hono, no keeper internals.',
};

/**
 * Module boundaries from docs/design.md, each with its reason. A later block's
 * no-restricted-imports replaces an earlier one's for the same file, so each repeats
 * undiciInternals.
 */
const boundaries = [
  {
    files: ['**/*.ts', '**/*.mts', '**/*.mjs', '**/*.js'],
    rules: { 'no-restricted-imports': ['error', { patterns: [undiciInternals] }] },
  },
  {
    files: ['src/errors.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            undiciInternals,
            {
              group: ['./*', '../*'],
              message:
                'errors.ts imports nothing internal, so every module can depend on it without cycles.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/token/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            undiciInternals,
            honoOnlyInHttp,
            redisOnlyInStore,
            {
              group: ['../proxy/*', '../http/*', '../proxy', '../http'],
              message:
                'token/ never imports proxy/ or http/: the token keeper must work without the proxy.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/proxy/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [undiciInternals, honoOnlyInHttp, redisOnlyInStore, proxySeesNoKeeper],
        },
      ],
    },
  },
  {
    files: UNDICI_BY_PATH,
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [honoOnlyInHttp, redisOnlyInStore, proxySeesNoKeeper] },
      ],
    },
  },
  {
    files: [
      'src/config/**/*.ts',
      'src/telemetry/**/*.ts',
      'src/standin/**/*.ts',
      'src/cli.ts',
      'src/main.ts',
      'src/clock.ts',
    ],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [undiciInternals, honoOnlyInHttp, redisOnlyInStore] },
      ],
    },
  },
  {
    files: ['src/http/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [undiciInternals, redisOnlyInStore] }],
    },
  },
  {
    // A backstop against accidents, not a target: files are cut by role, never for length alone
    // (docs/design.md "Module boundaries"); main.ts only chooses a command.
    files: ['src/**/*.ts'],
    ignores: ['src/**/*.test.ts'],
    rules: {
      'max-lines': ['error', { max: 500, skipBlankLines: false, skipComments: false }],
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: false, skipComments: false }],
    },
  },
  { files: ['src/main.ts'], rules: { 'max-lines': ['error', { max: 120 }] } },
  {
    files: ['src/http-fields/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            undiciInternals,
            {
              group: ['../*'],
              message: 'http-fields/ parses HTTP fields for token/ and proxy/: it imports neither.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/main.ts', 'src/**/*.test.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        {
          object: 'process',
          property: 'env',
          message: 'Only src/main.ts reads process.env (docs/design.md): pass configuration in.',
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'fetch', message: 'Inject fetch/dispatcher (docs/design.md): no global I/O.' },
      ],
    },
  },
  {
    // Time is a dependency (docs/design.md "Practices"): timers go through the injected clock, so
    // tests drive them with a fake one. Only src/clock.ts touches Node's timers.
    files: ['src/**/*.ts'],
    ignores: ['src/**/*.test.ts', 'src/clock.ts'],
    rules: {
      'no-restricted-globals': [
        'error',
        { name: 'fetch', message: 'Inject fetch/dispatcher (docs/design.md): no global I/O.' },
        ...['setTimeout', 'setInterval', 'clearTimeout', 'clearInterval'].map((name) => ({
          name,
          message: 'Use the injected Clock (src/clock.ts): tests drive it with a fake one.',
        })),
      ],
    },
  },
];

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'dist-*/**',
      'node_modules/**',
      'coverage/**',
      'bench/results/**',
      '.ci/work/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['*.mjs', '*.js'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // A background keeper makes stray promises easy to write; each one must be awaited or voided on purpose.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'no-console': 'error',
      eqeqeq: ['error', 'always'],
    },
  },
  {
    files: ['**/*.test.ts', 'test/**/*.ts', 'bench/**/*.ts', 'deploy/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/unbound-method': 'off',
      'no-console': 'off',
    },
  },
  { files: ['src/main.ts', 'src/cli.ts', 'bench/**/*.ts'], rules: { 'no-console': 'off' } },
  { files: ['**/*.mjs', '**/*.js'], ...tseslint.configs.disableTypeChecked },
  {
    // Plain-JS scripts (bench, CI helpers) run on Node directly.
    files: ['**/*.mjs', '**/*.js'],
    languageOptions: {
      globals: Object.fromEntries(
        [
          'process',
          'console',
          'fetch',
          'URL',
          'Buffer',
          'setTimeout',
          'clearTimeout',
          'setInterval',
          'clearInterval',
          'AbortController',
          'AbortSignal',
          'performance',
          'TextDecoder',
          'TextEncoder',
          'structuredClone',
          'queueMicrotask',
          'Response',
          'Request',
          'Headers',
        ].map((name) => [name, 'readonly']),
      ),
    },
  },
  { files: ['scripts/**', 'bench/**', 'deploy/**'], rules: { 'no-console': 'off' } },
  ...boundaries,
);
