/**
 * docs/reference/cli.md is generated from the commands' own help (`npm run docs:cli`): the checked-in
 * file must be the generator's current output, so a flag added to, renamed in or dropped from a
 * command's usage fails here until the reference is regenerated. The compiled CLI prints the same
 * texts (test/deploy/build.int.spec.ts runs `herald <command> --help` for every command).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { cliReference, commandHelp, synopsis } from '../../src/cli/help.js';
import { roleTable } from '../../src/cli/roles.js';

const roles = roleTable(heraldRegistry);
const reference = cliReference(roles);

describe('CLI reference', () => {
  it('has a section per command holding its own help', () => {
    for (const [name, role] of Object.entries(roles)) {
      expect(reference).toContain(`## herald ${name}\n\n\`\`\`text\n${commandHelp(name, role)}\n\`\`\``);
    }
  });

  it("splits a command's usage into one line per alternative, brackets kept whole", () => {
    expect(synopsis('line-channels', roles['line-channels']!)).toEqual([
      'herald line-channels add <line-oa-id> --organization <org> --channel-id <id> (--token-file <file> | --client-id <id> --client-secret-file <file>)',
      'herald line-channels list [--organization <org>] [--json]',
      'herald line-channels show <line-oa-id> [--json]',
      'herald line-channels remove <line-oa-id>',
      'herald line-channels rotate-key',
    ]);
    expect(synopsis('relay', roles.relay!)).toEqual(['herald relay [options]']);
    expect(synopsis('outbox', roles.outbox!)[1]).toBe('herald outbox requeue <id>');
  });

  it('docs/reference/cli.md is the generated reference (npm run docs:cli)', () => {
    const file = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'reference', 'cli.md'), 'utf8');
    expect(file).toBe(reference);
  });
});
