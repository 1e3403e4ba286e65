// Writes docs/reference/configuration.md from the settings sections and the registered slices' fragments
// (`npm run docs:config`); test/config/reference.unit.spec.ts fails when the file is stale.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONFIG_SECTIONS } from '../src/config.js';
import { configurationReference } from '../src/settings/reference.js';

const path = join(import.meta.dirname, '..', 'docs', 'reference', 'configuration.md');
writeFileSync(path, configurationReference(CONFIG_SECTIONS));
process.stdout.write(`wrote ${path}\n`);
