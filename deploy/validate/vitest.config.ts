import { defineConfig } from 'vitest/config';

/** Only for deploy/ci/validate-manifests.sh: compares `kubectl kustomize` with the built-in renderer. */
export default defineConfig({
  test: { include: ['deploy/validate/kubectl-render.test.ts'], root: '.', testTimeout: 60_000 },
});
