/**
 * The layering rules, checked on the source (ADR 0020): generic machinery never imports a slice's
 * module (slices arrive through the registry), only src/adapters/ imports drivers, the folder graph
 * of src/ is acyclic, the composition roots (the files that name Herald's registry) are imported by
 * nothing in src/, and the CLI's entry point, role table and commands do not import each other in a
 * cycle; src/client/ (the package's `herald/client`) imports nothing of the server's.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SRC = join(ROOT, 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Import specifiers of a file (static imports and re-exports; type-only ones too). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^\s*(?:import|export)\s[^'";]*?from\s+'([^']+)'/gm)].map((m) => m[1]!);
}

const resolved = (file: string, specifier: string) =>
  specifier.startsWith('.')
    ? relative(SRC, resolve(dirname(file), specifier)).replace(/\.js$/, '.ts')
    : specifier;

const GENERIC = [
  'api',
  'cli',
  'eventstore',
  'health',
  'maintenance',
  'messaging',
  'observability',
  'outbox',
  'ports',
  'projections',
  'registry',
  'roles',
  'runtime',
  'scanner',
  'settings',
  'worker',
];
const DRIVERS = [
  'pg',
  'pg-listen',
  'amqplib',
  'kafkajs',
  'ioredis',
  'undici',
  'nodemailer',
  'smtp-server',
  '@line/bot-sdk',
  'smpp',
  'jose',
];
/** Files that name Herald's own registry: the package entries, the CLI entry, the demo, the config. */
const COMPOSITION_ROOTS = ['config.ts', 'main.ts', 'demo.ts', 'index.ts', 'api.ts', 'testing.ts'];

/** A file's node in the folder graph: its top-level folder, or itself for a file at the root of src/. */
const nodeOf = (path: string) => (path.includes('/') ? path.split('/')[0]! : path);

function folderGraph(): Map<string, Map<string, string>> {
  const edges = new Map<string, Map<string, string>>();
  for (const file of sourceFiles(SRC)) {
    const from = nodeOf(relative(SRC, file));
    for (const specifier of importsOf(file)) {
      if (!specifier.startsWith('.')) continue;
      const to = nodeOf(resolved(file, specifier));
      if (to === from) continue;
      if (!edges.has(from)) edges.set(from, new Map());
      edges.get(from)!.set(to, `${relative(SRC, file)} imports ${resolved(file, specifier)}`);
    }
  }
  return edges;
}

describe('import rules', () => {
  // domain/decider.ts, domain/time.ts and domain/event-schemas.ts are every slice's shared vocabulary (the
  // decider shape; instants and their range; event versions and upcasters), not a slice's module.
  it('generic folders import no slice module (src/aggregates/, src/domain/<aggregate>)', () => {
    // The reader sees multi-line imports (the rule is not vacuous).
    expect(importsOf(join(SRC, 'aggregates/campaign/index.ts'))).toContain('./sweepers.js');
    expect(importsOf(join(SRC, 'main.ts'))).toContain('./aggregates/registry.js');
    const offenders: string[] = [];
    for (const folder of GENERIC) {
      for (const file of sourceFiles(join(SRC, folder))) {
        for (const specifier of importsOf(file)) {
          const target = resolved(file, specifier);
          if (
            target.startsWith('aggregates/') ||
            /^domain\/(?!(decider|time|event-schemas)\.ts$)/.test(target)
          ) {
            offenders.push(`${relative(SRC, file)} imports ${target}`);
          }
        }
      }
    }
    expect(offenders).toEqual([]);
  });

  it('only src/adapters/ imports drivers', () => {
    const offenders = sourceFiles(SRC)
      .filter((file) => !relative(SRC, file).startsWith('adapters/'))
      .flatMap((file) =>
        importsOf(file)
          .filter((specifier) => DRIVERS.includes(specifier))
          .map((specifier) => `${relative(SRC, file)} imports ${specifier}`),
      );
    expect(offenders).toEqual([]);
  });

  it('the folder graph of src/ is acyclic', () => {
    const edges = folderGraph();
    // The graph is read (not vacuous): the registry contract sits above the machinery it lists.
    expect(edges.get('registry')?.has('scanner')).toBe(true);
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (node: string, path: string[]) => {
      state.set(node, 'open');
      for (const [next, why] of edges.get(node) ?? []) {
        if (state.get(next) === 'open') {
          const from = path.indexOf(next);
          cycles.push(`${[...path.slice(from), next].join(' → ')} (${why})`);
        } else if (!state.has(next)) visit(next, [...path, next]);
      }
      state.set(node, 'done');
    };
    for (const node of edges.keys()) if (!state.has(node)) visit(node, [node]);
    expect(cycles).toEqual([]);
  });

  it('src/client/ imports only itself and its two libraries (the client runs without the server)', () => {
    const allowed = ['openapi-fetch', 'eventsource-parser'];
    const offenders = sourceFiles(join(SRC, 'client')).flatMap((file) =>
      importsOf(file)
        .filter((specifier) =>
          specifier.startsWith('.')
            ? !resolved(file, specifier).startsWith('client/')
            : !allowed.includes(specifier),
        )
        .map((specifier) => `${relative(SRC, file)} → ${specifier}`),
    );
    expect(offenders).toEqual([]);
  });

  it('nothing in src/ imports a composition root', () => {
    const offenders = sourceFiles(SRC).flatMap((file) =>
      importsOf(file)
        .map((specifier) => resolved(file, specifier))
        .filter(
          (target) =>
            ['main.ts', 'demo.ts'].includes(target) ||
            (COMPOSITION_ROOTS.includes(target) && !COMPOSITION_ROOTS.includes(relative(SRC, file))),
        )
        .map((target) => `${relative(SRC, file)} imports ${target}`),
    );
    expect(offenders).toEqual([]);
  });

  it('no import cycle between the CLI entry point, its role table and its commands', () => {
    const cli = [...sourceFiles(join(SRC, 'cli')), join(SRC, 'main.ts')].map((file) => relative(SRC, file));
    const edges = new Map(
      cli.map((file) => [
        file,
        importsOf(join(SRC, file))
          .map((s) => resolved(join(SRC, file), s))
          .filter((t) => cli.includes(t)),
      ]),
    );
    const cycles: string[] = [];
    const visit = (file: string, path: string[]) => {
      for (const next of edges.get(file) ?? []) {
        if (path.includes(next)) cycles.push([...path, next].join(' → '));
        else visit(next, [...path, next]);
      }
    };
    for (const file of cli) visit(file, [file]);
    expect(cycles).toEqual([]);
    // The entry point is imported by nothing: a test can import the role table without running it.
    expect([...edges.values()].flat()).not.toContain('main.ts');
  });
});
