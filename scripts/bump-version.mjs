// The version's one source is package.json; this script makes every other place say the same
// (docs/operations.md "Versions"):
//
//   node scripts/bump-version.mjs --check              every place agrees with package.json, and
//                                                      CHANGELOG.md has a section for the version
//   node scripts/bump-version.mjs 0.3.0 [--date YYYY-MM-DD]
//                                                      package.json and its lock, the Dockerfile's
//                                                      VERSION, the manifests' image tags, the
//                                                      docs' `?ref=v…` pins; CHANGELOG.md's
//                                                      [Unreleased] becomes [0.3.0] - date
//   [--root DIR]                                       another copy of the repository (tests)
//
// --version and the token grants' User-Agent read package.json's at build time (src/version.ts).
import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';

const { values: args, positionals } = parseArgs({
  options: {
    check: { type: 'boolean', default: false },
    date: { type: 'string' },
    root: { type: 'string', default: join(import.meta.dirname, '..') },
  },
  allowPositionals: true,
});
const root = args.root;
const SEMVER = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/;
const V = String.raw`\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?`;

/** Each place a version is written, outside package.json: a pattern whose group 2 is it. */
const PLACES = [
  { what: 'image tag', pattern: new RegExp(`(ghcr\\.io/example/oauth-sidecar:)(${V})`, 'g') },
  { what: 'git pin', pattern: new RegExp(`(oauth-sidecar//deploy/[\\w/-]+\\?ref=v)(${V})`, 'g') },
  { what: 'Dockerfile VERSION', pattern: new RegExp(`^(ARG VERSION=)(${V})$`, 'gm') },
];

/** The files that may hold one: the Dockerfile, the docs, deploy/'s YAML and Markdown. */
function files() {
  const out = ['Dockerfile', 'README.md'];
  const walk = (dir) => {
    for (const name of readdirSync(join(root, dir))) {
      const path = join(dir, name);
      if (statSync(join(root, path)).isDirectory()) walk(path);
      else if (/\.(md|ya?ml)$/.test(name)) out.push(path);
    }
  };
  walk('docs');
  walk('deploy');
  return out;
}

const read = (path) => readFileSync(join(root, path), 'utf8');
const pkg = JSON.parse(read('package.json'));

if (args.check) {
  const problems = [];
  for (const file of files()) {
    const text = read(file);
    for (const { what, pattern } of PLACES) {
      for (const match of text.matchAll(pattern)) {
        if (match[2] !== pkg.version) {
          problems.push(`${file}: ${what} ${match[2]}, package.json ${pkg.version}`);
        }
      }
    }
  }
  const lock = JSON.parse(read('package-lock.json'));
  if (lock.version !== pkg.version || lock.packages[''].version !== pkg.version) {
    problems.push(`package-lock.json: ${lock.version}, package.json ${pkg.version}`);
  }
  const released = new RegExp(
    `^## \\[${pkg.version.replaceAll('.', '\\.')}\\] - \\d{4}-\\d{2}-\\d{2}$`,
    'm',
  );
  if (!released.test(read('CHANGELOG.md'))) {
    problems.push(`CHANGELOG.md: no "## [${pkg.version}] - YYYY-MM-DD" section`);
  }
  if (!/^## \[Unreleased\]$/m.test(read('CHANGELOG.md'))) {
    problems.push('CHANGELOG.md: no "## [Unreleased]" section on top');
  }
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) process.exit(1);
  console.log(`version ${pkg.version}: every place agrees`);
} else {
  const [version] = positionals;
  if (version === undefined || !SEMVER.test(version)) {
    console.error('usage: node scripts/bump-version.mjs <x.y.z> [--date YYYY-MM-DD] | --check');
    process.exit(64);
  }
  const date = args.date ?? new Date().toISOString().slice(0, 10);
  const write = (path, text) => writeFileSync(join(root, path), text);
  pkg.version = version;
  write('package.json', `${JSON.stringify(pkg, null, 2)}\n`);
  const lock = JSON.parse(read('package-lock.json'));
  lock.version = version;
  lock.packages[''].version = version;
  write('package-lock.json', `${JSON.stringify(lock, null, 2)}\n`);
  for (const file of files()) {
    const text = read(file);
    let next = text;
    for (const { pattern } of PLACES)
      next = next.replace(pattern, (_, head) => `${head}${version}`);
    if (next !== text) {
      write(file, next);
      console.log(`${relative(root, join(root, file))}: ${version}`);
    }
  }
  const changelog = read('CHANGELOG.md');
  if (!changelog.includes(`## [${version}]`)) {
    write(
      'CHANGELOG.md',
      changelog.replace(/^## \[Unreleased\]$/m, `## [Unreleased]\n\n## [${version}] - ${date}`),
    );
    console.log(`CHANGELOG.md: [Unreleased] is now [${version}] - ${date}`);
  }
  console.log(`version ${version}: run npm run build (and npm run sea) to build it`);
}
