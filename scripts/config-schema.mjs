// Writes config/oauth-sidecar.schema.json, the JSON Schema of the --config YAML file, from the
// configuration's one schema (src/config/schema.ts, through src/config/json-schema.ts as tsc
// emitted it: run `npm run build` first). `--check` writes nothing and exits 1 when the committed
// file differs (test/config-schema.test.ts makes the same comparison).
//
//   npm run build && node scripts/config-schema.mjs [--check]
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SCHEMA_FILE, configJsonSchemaText } from '../dist/config/json-schema.js';

const file = join(import.meta.dirname, '..', SCHEMA_FILE);
const text = configJsonSchemaText();
if (process.argv.includes('--check')) {
  let committed = '';
  try {
    committed = readFileSync(file, 'utf8');
  } catch {
    // missing: reported below
  }
  if (committed !== text) {
    console.error(
      `${SCHEMA_FILE} differs from src/config/schema.ts: run node scripts/config-schema.mjs`,
    );
    process.exit(1);
  }
  console.log(`${SCHEMA_FILE} is up to date`);
} else {
  writeFileSync(file, text);
  console.log(`wrote ${SCHEMA_FILE}`);
}
