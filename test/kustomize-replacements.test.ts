/**
 * The built-in renderer's kustomize `replacements` and strategic-merge details
 * (deploy/validate/replacements.ts, kustomize.ts), on small kustomizations written to a temp
 * directory: the documented cases (source by kind/name/fieldPath, targets by select/reject and
 * fieldPaths, delimiter/index/create), local-config sources left out, and the errors kustomize gives.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { duplicateIds, renderKustomization, type Manifest } from '../deploy/validate/kustomize.js';
import { applyReplacements, splitPath } from '../deploy/validate/replacements.js';
import { tempDir } from './helpers/sidecar-process.js';

const configMap = (name: string, data: Record<string, string>, annotations?: object): Manifest => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, ...(annotations ? { annotations } : {}) },
  data,
});

const deployment = (name: string, labels: Record<string, string> = {}): Manifest => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name, labels },
  spec: {
    template: {
      metadata: { labels: { app: name } },
      spec: {
        containers: [
          { name: 'web', image: 'web:1', ports: [{ name: 'http', containerPort: 8080 }] },
          { name: 'side', image: 'side:1', env: [{ name: 'TARGET', value: 'x' }] },
        ],
      },
    },
  },
});

/** Writes `files` (name → YAML documents or text) into a fresh directory and returns it. */
function kustomization(files: Record<string, unknown[] | string>): string {
  const dir = tempDir('kustomize-test-');
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    const text =
      typeof content === 'string' ? content : content.map((d) => stringify(d)).join('---\n');
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

describe('replacements in the built-in renderer', () => {
  it('copies a source field into every selected target field, by name, wildcard and list item', () => {
    const docs = [
      configMap('settings', { image: 'registry.example/web:2.0', port: '9090' }),
      deployment('a', { inject: 'true' }),
      deployment('b'),
    ];
    applyReplacements(
      [
        {
          source: { kind: 'ConfigMap', name: 'settings', fieldPath: 'data.image' },
          targets: [
            {
              select: { kind: 'Deployment' },
              reject: [{ name: 'b' }],
              fieldPaths: ['spec.template.spec.containers.[name=web].image'],
            },
          ],
        },
        {
          source: { kind: 'ConfigMap', fieldPath: 'data.port' },
          targets: [
            {
              select: { kind: 'Deployment', labelSelector: 'inject=true' },
              fieldPaths: ['spec.template.spec.containers.*.ports.0.containerPort'],
            },
          ],
        },
      ],
      docs,
    );
    const containers = (d: Manifest) =>
      (d.spec as { template: { spec: { containers: Record<string, never>[] } } }).template.spec
        .containers;
    expect(containers(docs[1]!)[0]).toMatchObject({
      image: 'registry.example/web:2.0',
      // The target keeps its type: a port stays a number.
      ports: [{ name: 'http', containerPort: 9090 }],
    });
    expect(containers(docs[2]!)[0]).toMatchObject({
      image: 'web:1',
      ports: [{ containerPort: 8080 }],
    });
  });

  it('delimiter and index: a part of the source, a part of the target, or a prefix/suffix', () => {
    const docs = [configMap('runbook', { base: 'https://git.example/docs/runbook.md' })];
    docs.push(
      configMap('alerts', {
        a: 'https://github.com/example/x/runbook.md#down',
        b: 'https://github.com/example/x/runbook.md#slow',
        host: 'one.two.three',
        name: 'sidecar',
        tail: 'sidecar',
      }),
    );
    applyReplacements(
      [
        {
          source: { kind: 'ConfigMap', name: 'runbook', fieldPath: 'data.base' },
          targets: [
            {
              select: { name: 'alerts' },
              fieldPaths: ['data.a', 'data.b'],
              options: { delimiter: '#', index: 0 },
            },
          ],
        },
        {
          source: {
            kind: 'ConfigMap',
            name: 'runbook',
            fieldPath: 'data.base',
            options: { delimiter: '/', index: 2 },
          },
          targets: [
            {
              select: { name: 'alerts' },
              fieldPaths: ['data.host'],
              options: { delimiter: '.', index: 1 },
            },
            {
              select: { name: 'alerts' },
              fieldPaths: ['data.name'],
              options: { delimiter: '-', index: -1 },
            },
            {
              select: { name: 'alerts' },
              fieldPaths: ['data.tail'],
              options: { delimiter: '-', index: 5 },
            },
          ],
        },
      ],
      docs,
    );
    expect(docs[1]!.data).toEqual({
      a: 'https://git.example/docs/runbook.md#down',
      b: 'https://git.example/docs/runbook.md#slow',
      host: 'one.git.example.three',
      name: 'git.example-sidecar',
      tail: 'sidecar-git.example',
    });
  });

  it('create adds a missing field; without it a missing target field is an error', () => {
    const docs = [configMap('source', { v: 'x' }), deployment('a')];
    const replace = (fieldPath: string, create?: boolean) =>
      applyReplacements(
        [
          {
            source: { kind: 'ConfigMap', fieldPath: 'data.v' },
            targets: [
              { select: { kind: 'Deployment' }, fieldPaths: [fieldPath], options: { create } },
            ],
          },
        ],
        docs,
      );
    replace('spec.template.metadata.labels.[example.com/app]', true);
    expect(docs[1]!.spec).toMatchObject({
      template: { metadata: { labels: { app: 'a', 'example.com/app': 'x' } } },
    });
    expect(() => replace('spec.template.metadata.annotations.note')).toThrow(
      'Deployment/a: no field spec.template.metadata.annotations.note to replace',
    );
    expect(() => replace('spec.template.spec.containers.*.name', true)).toThrow(/multi-value/);
  });

  it('the source must be exactly one object and have the field', () => {
    const two = [deployment('a'), deployment('b'), configMap('c', {})];
    const run = (source: object) =>
      applyReplacements([{ source, targets: [{ select: { kind: 'ConfigMap' } }] }], two);
    expect(() => run({ kind: 'Deployment' })).toThrow(/multiple matches/);
    expect(() => run({ kind: 'Deployment', name: 'z' })).toThrow(/nothing selected/);
    expect(() => run({ kind: 'Deployment', name: 'a', fieldPath: 'spec.nothing' })).toThrow(
      /fieldPath `spec.nothing` is missing/,
    );
    expect(() =>
      run({ kind: 'Deployment', name: 'a', options: { delimiter: '-', index: 3 } }),
    ).toThrow(/out of bounds/);
    // A target that selects nothing is an error here (kustomize skips it).
    expect(() =>
      applyReplacements(
        [{ source: { kind: 'ConfigMap' }, targets: [{ select: { kind: 'Service' } }] }],
        two,
      ),
    ).toThrow('replacement target {"kind":"Service"} selects nothing');
  });

  it('splits field paths as kustomize does: brackets and escaped dots keep their dots', () => {
    expect(splitPath('metadata.annotations.[config.kubernetes.io/local-config]')).toEqual([
      'metadata',
      'annotations',
      '[config.kubernetes.io/local-config]',
    ]);
    expect(splitPath('a.b\\.c.[name=x.y].d')).toEqual(['a', 'b.c', '[name=x.y]', 'd']);
  });

  it('a kustomization: replacements after patches, from a file or inline, local config left out', () => {
    const dir = kustomization({
      'kustomization.yaml': [
        {
          apiVersion: 'kustomize.config.k8s.io/v1beta1',
          kind: 'Kustomization',
          resources: ['app.yaml', 'values.yaml'],
          patches: [{ path: 'patch.yaml' }],
          replacements: [{ path: 'replacement.yaml' }],
        },
      ],
      'app.yaml': [deployment('app')],
      'values.yaml': [
        configMap('values', { image: 'web:3' }, { 'config.kubernetes.io/local-config': 'true' }),
      ],
      // The patch sets the image to one the replacement then overrides: the replacement runs last.
      'patch.yaml': [
        {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: { name: 'app' },
          spec: { template: { spec: { containers: [{ name: 'web', image: 'patched' }] } } },
        },
      ],
      'replacement.yaml': [
        {
          source: { kind: 'ConfigMap', name: 'values', fieldPath: 'data.image' },
          targets: [
            {
              select: { kind: 'Deployment' },
              fieldPaths: ['spec.template.spec.containers.[name=web].image'],
            },
          ],
        },
      ],
    });
    const docs = renderKustomization(dir);
    expect(docs.map((d) => `${d.kind}/${d.metadata.name}`)).toEqual(['Deployment/app']);
    expect(JSON.stringify(docs[0])).toContain('"image":"web:3"');
  });

  it('strategic merge: container ports merge by containerPort, `$patch: replace` replaces the list', () => {
    const patch = (ports: object[]) => ({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'app' },
      spec: { template: { spec: { containers: [{ name: 'web', ports }] } } },
    });
    const render = (ports: object[]) => {
      const dir = kustomization({
        'kustomization.yaml': [
          { kind: 'Kustomization', resources: ['app.yaml'], patches: [{ path: 'patch.yaml' }] },
        ],
        'app.yaml': [deployment('app')],
        'patch.yaml': [patch(ports)],
      });
      const [doc] = renderKustomization(dir);
      return (doc!.spec as { template: { spec: { containers: { ports?: unknown }[] } } }).template
        .spec.containers[0]!.ports;
    };
    expect(render([{ name: 'http', containerPort: 18080 }])).toEqual([
      { name: 'http', containerPort: 18080 },
      { name: 'http', containerPort: 8080 },
    ]);
    expect(render([{ $patch: 'replace' }, { name: 'web', containerPort: 18080 }])).toEqual([
      { name: 'web', containerPort: 18080 },
    ]);
  });

  it('a duplicate kind/namespace/name is named, and fails a render', () => {
    const docs = [configMap('a', {}), configMap('a', {}), deployment('a'), configMap('b', {})];
    expect(duplicateIds(docs)).toEqual(['ConfigMap/-/a']);
    const dir = kustomization({
      'kustomization.yaml': [{ kind: 'Kustomization', resources: ['one.yaml', 'two.yaml'] }],
      'one.yaml': [configMap('a', {})],
      'two.yaml': [configMap('a', {})],
    });
    expect(() => renderKustomization(dir)).toThrow(/ConfigMap\/-\/a defined twice/);
  });
});
