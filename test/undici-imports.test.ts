/**
 * undici's modules by path only where docs/design.md "Exceptions" names them: the lint rule
 * (eslint.config.mjs, `no-restricted-imports`) run through ESLint's API on fixture texts, and the
 * table checked against the rule's list of allowed files.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..');
/** eslint.config.mjs is plain JS (no declaration file): its list, typed here. */
const CONFIG: string = join(ROOT, 'eslint.config.mjs');
const { UNDICI_BY_PATH } = (await import(CONFIG)) as { UNDICI_BY_PATH: readonly string[] };

const eslint = new ESLint({
  cwd: ROOT,
  // Only the rule under test, without the type-aware rules' TypeScript program.
  ruleFilter: ({ ruleId }) => ruleId === 'no-restricted-imports',
  overrideConfig: { languageOptions: { parserOptions: { projectService: false, project: null } } },
});

/** The no-restricted-imports messages for `text` linted as if it were `file`. */
async function refusals(text: string, file: string): Promise<string[]> {
  const [result] = await eslint.lintText(text, { filePath: join(ROOT, file) });
  return result!.messages
    .filter((message) => message.ruleId === 'no-restricted-imports')
    .map((message) => message.message);
}

const DEEP = "import Pool from 'undici/lib/dispatcher/pool.js';\nexport const P = Pool;\n";
const PUBLIC = "import { Pool } from 'undici';\nexport const P = Pool;\n";

describe("undici's modules by path", () => {
  it.each([
    'src/proxy/egress-agent.ts',
    'src/proxy/forwarder.ts',
    'src/token/client.ts',
    'src/http/answers.ts',
    'src/main.ts',
    'test/helpers/upstream.ts',
    'bench/run.mjs',
  ])('are refused in %s', async (file) => {
    const messages = await refusals(DEEP, file);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toContain('docs/design.md "Exceptions"');
    expect(await refusals("export * from 'undici/lib/api/api-connect.js';\n", file)).toHaveLength(
      1,
    );
    expect(await refusals(PUBLIC, file)).toEqual([]);
  });

  it('are allowed in the files "Exceptions" names, whose other boundaries still hold', async () => {
    for (const file of UNDICI_BY_PATH) expect(await refusals(DEEP, file), file).toEqual([]);
    expect(await refusals("import { x } from '../token/keeper.js';\n", UNDICI_BY_PATH[0]!)).toEqual(
      [expect.stringContaining('proxy/ sees the keeper only')],
    );
  });

  it('the files the rule allows are the ones the Exceptions table names', () => {
    const design = readFileSync(join(ROOT, 'docs', 'design.md'), 'utf8');
    const table = design.slice(design.indexOf('## Exceptions'), design.indexOf('## Practices'));
    const row = table.split('\n').find((line) => line.startsWith("| undici's"));
    expect(row).toBeDefined();
    for (const file of UNDICI_BY_PATH) expect(row).toContain(`\`${file}\``);
  });
});
