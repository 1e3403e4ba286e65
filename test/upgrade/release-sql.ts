/**
 * A release's SQL, collected mechanically (ADR 0039, expand/contract): every statement the code in src/
 * can send to PostgreSQL, so that a later release's migrations can be checked against it — a migration
 * must never break the previous release's queries while both run against one database during a rollout.
 *
 * Three sources, deduplicated by their whitespace-normalized text:
 *   - static: every string or template literal in src/ (TypeScript's parser) that reads as a DML
 *     statement (`select … from`, `insert into`, `update … set`, `delete from`, `with …`); a template
 *     with substitutions is taken from the module's exports instead, where it is already evaluated;
 *   - exports: every exported string (or string inside an exported plain object) of the query modules,
 *     evaluated — this is how statements built from fragments (`${distinctLeadingValues(…)}`) come in;
 *   - generated: the statements src/adapters/postgres/state-table.ts builds per state table
 *     (GENERATED_STATEMENTS, filled as the registry's aggregates are loaded).
 * Templates with substitutions that are neither exported nor generated are counted as `unresolved`
 * (the snapshot says how many), never guessed at.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import type { SqlClient } from '../../src/ports/database.js';
import { eventVersions } from './rollout-rule.js';

export const ROOT = join(import.meta.dirname, '..', '..');
export const SNAPSHOT_DIR = join(ROOT, 'test', 'upgrade', 'release-sql');

export interface CapturedStatement {
  /** Where it was found: `src/…/file.ts:NAME` (export), `src/…/file.ts:line` (literal), or `state-table:<table>.<name>`. */
  source: string;
  sql: string;
}

export interface ReleaseSql {
  /** The release (package.json's version) the snapshot was taken from. */
  version: string;
  /** The migrations that release shipped: the ones a later release may no longer edit or contract blindly. */
  migrations: string[];
  /**
   * Event schema versions that release reads, per stream type and event type (the highest version its
   * upcasters reach). A later release may write a version only if the previous release reads it.
   */
  eventsRead: Record<string, Record<string, number>>;
  /** Templates with substitutions that could not be resolved (not in the snapshot). */
  unresolved: string[];
  statements: CapturedStatement[];
}

const DML =
  /^\s*(select\b[\s\S]*\bfrom\b|insert\s+into\b|update\s+\S+[\s\S]*\bset\b|delete\s+from\b|with\s+(recursive\s+)?\w+(\s*\([^)]*\))?\s+as\s*(not\s+)?(materialized\s+)?\()/i;

/** Whitespace-normalized, for de-duplication. */
export const normalize = (sql: string) => sql.replace(/\s+/g, ' ').trim();

export function isStatement(text: string): boolean {
  if (!DML.test(text)) return false;
  return !/^\s*with\b/i.test(text) || hasMainStatement(text);
}

/** A `with` fragment (CTEs a template completes) is not a statement: a statement must follow the CTEs. */
function hasMainStatement(text: string): boolean {
  let rest = text.replace(/^\s*with\s+(recursive\s+)?/i, '');
  for (;;) {
    const head = /^\s*\w+\s*(\([^)]*\))?\s*as\s*(not\s+)?(materialized\s+)?\(/i.exec(rest);
    if (!head) return false;
    let depth = 1;
    let i = head[0].length;
    for (; i < rest.length && depth > 0; i++) {
      if (rest[i] === '(') depth++;
      else if (rest[i] === ')') depth--;
    }
    rest = rest.slice(i);
    const comma = /^\s*,/.exec(rest);
    if (!comma) return /^\s*\(?\s*(select|insert|update|delete)\b/i.test(rest);
    rest = rest.slice(comma[0].length);
  }
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(path));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) out.push(path);
  }
  return out.sort();
}

/** Literal statements of one file, and the names of its SQL templates with substitutions. */
function literals(path: string): { found: CapturedStatement[]; templates: string[] } {
  const file = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.ES2022, true);
  const rel = relative(ROOT, path);
  const found: CapturedStatement[] = [];
  const templates: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) {
      if (isStatement(node.text)) {
        const line = file.getLineAndCharacterOfPosition(node.getStart()).line + 1;
        found.push({ source: `${rel}:${line}`, sql: node.text });
      }
    } else if (ts.isTemplateExpression(node) && isStatement(node.head.text)) {
      const line = file.getLineAndCharacterOfPosition(node.getStart()).line + 1;
      templates.push(`${rel}:${line}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return { found, templates };
}

/** Exported strings (and strings in exported plain objects, one level down) that read as statements. */
function exportedStatements(rel: string, module: Record<string, unknown>): CapturedStatement[] {
  const out: CapturedStatement[] = [];
  for (const [name, value] of Object.entries(module)) {
    if (typeof value === 'string' && isStatement(value)) out.push({ source: `${rel}:${name}`, sql: value });
    else if (value && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
      for (const [key, inner] of Object.entries(value)) {
        if (typeof inner === 'string' && isStatement(inner)) {
          out.push({ source: `${rel}:${name}.${key}`, sql: inner });
        }
      }
    }
  }
  return out;
}

/** Every statement the code under src/ issues, as far as it can be found mechanically. */
export async function collectStatements(): Promise<{
  statements: CapturedStatement[];
  unresolved: string[];
}> {
  // Not the HTTP client (no SQL) nor herald/testing's contract suites (tables of their own fixtures).
  const files = sourceFiles(join(ROOT, 'src')).filter(
    (f) => !f.includes(join('src', 'client')) && !f.includes(join('src', 'testing')),
  );
  const all: CapturedStatement[] = [];
  const templates: string[] = [];
  for (const path of files) {
    const { found, templates: t } = literals(path);
    all.push(...found);
    templates.push(...t);
  }
  // Evaluated exports of the modules that hold SQL (importing the aggregate registry also builds
  // every state table, which fills GENERATED_STATEMENTS).
  await import(pathToFileURL(join(ROOT, 'src', 'aggregates', 'registry.ts')).href);
  const exported: CapturedStatement[] = [];
  for (const path of files) {
    const text = readFileSync(path, 'utf8');
    if (!/^export const \w+ = `/m.test(text) && !/-queries\.ts$/.test(path)) continue;
    const module = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
    exported.push(...exportedStatements(relative(ROOT, path), module));
  }
  const { GENERATED_STATEMENTS } = (await import(
    pathToFileURL(join(ROOT, 'src', 'adapters', 'postgres', 'state-table.ts')).href
  )) as typeof import('../../src/adapters/postgres/state-table.js');
  for (const [table, statements] of GENERATED_STATEMENTS) {
    for (const [name, sql] of Object.entries(statements)) {
      if (isStatement(sql)) exported.push({ source: `state-table:${table}.${name}`, sql });
    }
  }
  all.push(...exported);
  const seen = new Set<string>();
  const statements: CapturedStatement[] = [];
  for (const s of all) {
    const key = normalize(s.sql);
    if (seen.has(key)) continue;
    seen.add(key);
    statements.push({ source: s.source, sql: s.sql.trim() });
  }
  // A template is resolved when an export of its file evaluated to a statement at that file.
  const exportedFiles = new Set(exported.map((s) => s.source.split(':')[0]));
  const unresolved = templates.filter((t) => !exportedFiles.has(t.split(':')[0]!));
  return { statements, unresolved };
}

export interface PrepareFailure {
  source: string;
  sql: string;
  error: string;
}

/**
 * PREPAREs each statement (parse, analyse and plan against the schema on the connection's search_path,
 * without running it) inside a transaction that is rolled back; returns the statements that failed.
 * Parameters whose type PostgreSQL cannot infer from the statement alone (42P18) are retried as `text`:
 * the check is about the schema, not about the caller's parameter types.
 */
export async function prepareAll(
  sql: SqlClient,
  statements: readonly CapturedStatement[],
): Promise<PrepareFailure[]> {
  const failures: PrepareFailure[] = [];
  for (const [index, statement] of statements.entries()) {
    const name = `herald_release_sql_${index}`;
    await sql.query('savepoint release_sql');
    try {
      await sql.query(`prepare ${name} as ${statement.sql}`);
      await sql.query(`deallocate ${name}`);
      await sql.query('release savepoint release_sql');
    } catch (error) {
      await sql.query('rollback to savepoint release_sql');
      const retried = await prepareUntyped(sql, name, statement.sql, error);
      if (retried) failures.push({ source: statement.source, sql: statement.sql, error: retried });
      else await sql.query('release savepoint release_sql');
    }
  }
  return failures;
}

/** A retry for parameters PostgreSQL could not type; the error message when it still fails, else null. */
async function prepareUntyped(
  sql: SqlClient,
  name: string,
  text: string,
  error: unknown,
): Promise<string | null> {
  const first = error as { code?: string; message?: string };
  if (first.code !== '42P18') return first.message ?? String(error);
  const count = Math.max(0, ...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
  const types = Array.from({ length: count }, () => 'text').join(', ');
  try {
    await sql.query(`prepare ${name} (${types}) as ${text}`);
    await sql.query(`deallocate ${name}`);
    return null;
  } catch (retry) {
    await sql.query('rollback to savepoint release_sql');
    return (retry as { message?: string }).message ?? String(retry);
  }
}

/** The whole snapshot of the code as it is now. */
export async function releaseSnapshot(version: string): Promise<ReleaseSql> {
  const { statements, unresolved } = await collectStatements();
  const migrations = readdirSync(join(ROOT, 'migrations'))
    .filter((f) => /^\d{6}_[a-z0-9_]+\.sql$/.test(f))
    .sort();
  const { heraldRegistry } = await import('../../src/aggregates/registry.js');
  const eventsRead = eventVersions(heraldRegistry, 'reads');
  return { version, migrations, eventsRead, unresolved, statements };
}
