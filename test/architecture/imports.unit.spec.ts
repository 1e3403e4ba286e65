/**
 * The layering rules, checked on the source: generic machinery never imports an aggregate's module
 * (aggregates arrive through the registry), only src/adapters/ imports drivers, and the CLI's entry
 * point, role table and commands do not import each other in a cycle.
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
  'eventstore',
  'scanner',
  'worker',
  'outbox',
  'projections',
  'roles',
  'runtime',
  'maintenance',
  'ports',
  'messaging',
  'observability',
];
const DRIVERS = ['pg', 'pg-listen', 'amqplib', 'kafkajs', 'ioredis', 'undici', 'nodemailer'];

describe('import rules', () => {
  it('generic folders import no aggregate module (src/aggregates/, src/domain/<aggregate>)', () => {
    // The reader sees multi-line imports (the rule is not vacuous).
    expect(importsOf(join(SRC, 'aggregates/campaign/index.ts'))).toContain('./sweepers.js');
    expect(importsOf(join(SRC, 'cli/main.ts'))).toContain('../aggregates/registry.js');
    const offenders: string[] = [];
    for (const folder of GENERIC) {
      for (const file of sourceFiles(join(SRC, folder))) {
        for (const specifier of importsOf(file)) {
          const target = resolved(file, specifier);
          if (target.startsWith('aggregates/') || /^domain\/(?!decider\.ts$)/.test(target)) {
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

  it('no import cycle between the CLI entry point, its role table and its commands', () => {
    const cli = sourceFiles(join(SRC, 'cli')).map((file) => relative(SRC, file));
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
    expect([...edges.values()].flat()).not.toContain('cli/main.ts');
  });
});
