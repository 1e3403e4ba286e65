/**
 * The configuration reference (docs/reference/configuration.md) is generated from the settings sections and the
 * registered slices' fragments: it lists every variable loadConfig reads, once, with its default and
 * meaning, and the checked-in file is the generator's current output (`npm run docs:config`).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG_SECTIONS, CONFIG_VARIABLES } from '../../src/config.js';
import { configurationReference } from '../../src/settings/reference.js';

const reference = configurationReference(CONFIG_SECTIONS);

describe('configuration reference', () => {
  it('documents every variable once, each with a meaning', () => {
    const rows = [...reference.matchAll(/^\| `([A-Z0-9_]+)` \| ([^|]*) \| (.*) \|$/gm)];
    expect(rows.map((r) => r[1]).sort()).toEqual([...CONFIG_VARIABLES].sort());
    expect(rows.filter((r) => r[3]!.trim() === '').map((r) => r[1])).toEqual([]);
    expect(reference).toContain('| `DATABASE_URL` | (required) |');
    expect(reference).toContain('| `HERALD_SMS_TIMEZONE` | `Asia/Dhaka` |');
    expect(reference).toContain('## Cron jobs');
  });

  it('docs/reference/configuration.md is the generated reference (npm run docs:config)', () => {
    const file = readFileSync(
      join(import.meta.dirname, '..', '..', 'docs', 'reference', 'configuration.md'),
      'utf8',
    );
    expect(file).toBe(reference);
  });
});
