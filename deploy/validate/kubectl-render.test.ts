/**
 * `kubectl kustomize` output (rendered by deploy/ci/validate-manifests.sh into
 * DEPLOY_KUBECTL_RENDER_DIR) must equal the built-in renderer's and pass the same checks. Run only
 * by that script, through deploy/validate/vitest.config.ts, where kubectl is installed; a missing
 * directory is a failure, not a skip.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { crossReferences, typecheckFields, validateSchemas } from './checks.js';
import {
  KUSTOMIZATIONS,
  SECRET_EXAMPLES,
  readManifests,
  renderAll,
  type Manifest,
} from './kustomize.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const rendered = renderAll(root);
const everything = [
  ...[...rendered.values()].flat(),
  ...SECRET_EXAMPLES.flatMap((file) => readManifests(join(root, file))),
];
const sort = (list: Manifest[]) =>
  [...list].sort((a, b) =>
    `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`),
  );

describe('kubectl kustomize output', () => {
  const kubectlDir = process.env.DEPLOY_KUBECTL_RENDER_DIR ?? '';
  it('was rendered', () => {
    expect(kubectlDir, 'DEPLOY_KUBECTL_RENDER_DIR').not.toBe('');
  });
  for (const name of KUSTOMIZATIONS) {
    it(`${name}: equals this renderer's and passes the same checks`, () => {
      const file = join(kubectlDir, `${name.replaceAll('/', '_')}.yaml`);
      expect(existsSync(file), file).toBe(true);
      const docs = parseAllDocuments(readFileSync(file, 'utf8')).map(
        (doc) => doc.toJS() as Manifest,
      );
      expect(sort(docs)).toEqual(sort(rendered.get(name)!));
      expect(validateSchemas(docs)).toEqual([]);
      expect(typecheckFields(docs, root)).toEqual([]);
      const others = everything.filter((d) => !rendered.get(name)!.includes(d));
      expect(crossReferences(docs, others)).toEqual([]);
    });
  }
});
