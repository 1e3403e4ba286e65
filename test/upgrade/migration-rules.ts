/**
 * The expand/contract rules for migration files (ADR 0039), as a lint: during a rollout the previous
 * release runs against the schema this release's migrations made, so an *expand* migration may only add
 * (tables, nullable columns, columns with a default, indexes, constraints NOT VALID first), and whatever
 * removes or narrows — dropping or renaming a column or table, changing a column's type, `set not null`,
 * a new `not null` column without a default — is a *contract* migration: allowed only in a file that
 * says so on its first line (`-- contract: <what the previous release stopped using>`), shipped at the
 * earliest one release after the code stopped using it; test/upgrade/previous-release-sql.int.spec.ts
 * then proves the previous release no longer issues a statement it breaks.
 */

export interface MigrationViolation {
  rule: string;
  /** The offending clause, as written. */
  clause: string;
}

const RULES: readonly { rule: string; pattern: RegExp }[] = [
  { rule: 'drops a column', pattern: /\bdrop\s+column\b[^,;]*/gi },
  { rule: 'drops a table or view', pattern: /\bdrop\s+(table|view|materialized\s+view)\b[^;]*/gi },
  { rule: 'renames', pattern: /\brename\s+(column\s+)?\w+\s+to\b[^,;]*|\brename\s+to\b[^,;]*/gi },
  { rule: "changes a column's type", pattern: /\balter\s+column\s+\w+\s+(set\s+data\s+)?type\b[^,;]*/gi },
  { rule: 'sets a column not null', pattern: /\balter\s+column\s+\w+\s+set\s+not\s+null\b/gi },
  {
    rule: 'adds a not null column without a default',
    pattern: /\badd\s+column\s+(if\s+not\s+exists\s+)?\w+\s+[^,;]*?\bnot\s+null\b[^,;]*/gi,
  },
];

/** SQL without comments (a comment may say "drop column" when explaining why it does not). */
const withoutComments = (sql: string) => sql.replace(/--[^\n]*/g, '').replace(/\/\*[\s\S]*?\*\//g, '');

/** Whether the file declares itself a contract step on its first line. */
export const isContract = (sql: string) => /^--\s*contract:\s*\S/i.test(sql.trimStart());

/** The expand rules a migration breaks (none for a declared contract migration). */
export function migrationViolations(sql: string): MigrationViolation[] {
  if (isContract(sql)) return [];
  const text = withoutComments(sql);
  const found: MigrationViolation[] = [];
  for (const { rule, pattern } of RULES) {
    for (const match of text.matchAll(pattern)) {
      const clause = match[0].replace(/\s+/g, ' ').trim();
      if (rule.startsWith('adds a not null') && /\bdefault\b|\bgenerated\b/i.test(clause)) continue;
      found.push({ rule, clause });
    }
  }
  return found;
}
