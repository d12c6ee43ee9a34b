// The typecheck and eslint of `npm test` in one process, over one TypeScript program: the program
// is built once from tsconfig.json and fully checked (what `tsc --noEmit` reports), then handed to
// eslint (typescript-eslint's `parserOptions.programs`) for the type-aware rules, which find the
// types already computed. Separately, eslint's project service builds and checks the same program a
// second time: most of eslint's time. The rules, the files and the verdicts are those of
// `tsc --noEmit` and `eslint --max-warnings 0 .` (both still work alone: `npm run typecheck`,
// `npm run lint`). A TypeScript file outside tsconfig.json's program fails eslint here, as the
// project service would fail it.
//
//   node scripts/typed-checks.mjs [typecheck] [eslint]     (both when none is named)
//
// Run by scripts/static-checks.mjs, it sends each check's result as a message; alone, it prints
// them and exits 1 if one failed.
import { ESLint } from 'eslint';
import { join } from 'node:path';
import ts from 'typescript';

const root = join(import.meta.dirname, '..');
const wanted = process.argv.slice(2);
const names = wanted.length > 0 ? wanted : ['typecheck', 'eslint'];
const unknown = names.filter((n) => n !== 'typecheck' && n !== 'eslint');
if (unknown.length > 0) {
  console.error(`unknown check: ${unknown.join(', ')} (known: typecheck, eslint)`);
  process.exit(2);
}

/** tsconfig.json's program, as `tsc --noEmit` builds it. */
function buildProgram() {
  const configPath = join(root, 'tsconfig.json');
  const { config, error } = ts.readConfigFile(configPath, ts.sys.readFile);
  if (error) return { diagnostics: [error] };
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, root, undefined, configPath);
  const program = ts.createProgram({
    rootNames: parsed.fileNames,
    options: parsed.options,
    projectReferences: parsed.projectReferences,
    configFileParsingDiagnostics: parsed.errors,
  });
  return { program, diagnostics: [] };
}

const formatHost = {
  getCanonicalFileName: (name) => name,
  getCurrentDirectory: () => root,
  getNewLine: () => '\n',
};

/** What `tsc --noEmit` reports: configuration, options, syntax, then types. */
function typecheck(built) {
  const diagnostics = built.program ? ts.getPreEmitDiagnostics(built.program) : built.diagnostics;
  const errors = diagnostics.filter((d) => d.category === ts.DiagnosticCategory.Error);
  const output = diagnostics.length > 0 ? ts.formatDiagnostics(diagnostics, formatHost) : '';
  return { ok: errors.length === 0 && built.program !== undefined, output };
}

/** `eslint --max-warnings 0 .` with the program for the TypeScript files. */
async function eslint(built) {
  if (!built.program) return { ok: false, output: 'eslint: tsconfig.json could not be read\n' };
  const linter = new ESLint({
    cwd: root,
    overrideConfig: [
      {
        files: ['**/*.ts', '**/*.mts', '**/*.cts', '**/*.tsx'],
        languageOptions: { parserOptions: { projectService: false, programs: [built.program] } },
      },
    ],
  });
  const results = await linter.lintFiles(['.']);
  const problems = results.reduce((n, r) => n + r.errorCount + r.warningCount, 0);
  const output = await (await linter.loadFormatter('stylish')).format(results);
  return { ok: problems === 0, output };
}

const started = Date.now();
const built = buildProgram();
let failed = false;
for (const name of names) {
  const result = name === 'typecheck' ? typecheck(built) : await eslint(built);
  const seconds = (Date.now() - started) / 1000;
  failed ||= !result.ok;
  if (process.send) process.send({ name, ...result, seconds });
  else {
    process.stdout.write(result.output);
    console.log(`${result.ok ? 'ok' : 'FAILED'}: ${name} (${seconds.toFixed(0)} s)`);
  }
}
process.exitCode = failed ? 1 : 0;
