// Writes docs/reference/cli.md from each command's own help (`npm run docs:cli`, src/cli/help.ts);
// test/docs/cli-reference.unit.spec.ts fails when the file is stale.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { heraldRegistry } from '../src/aggregates/registry.js';
import { cliReference } from '../src/cli/help.js';
import { roleTable } from '../src/cli/roles.js';

const path = join(import.meta.dirname, '..', 'docs', 'reference', 'cli.md');
writeFileSync(path, cliReference(roleTable(heraldRegistry)));
process.stdout.write(`wrote ${path}\n`);
