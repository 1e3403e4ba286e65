/**
 * `npm run upgrade:capture-sql`: writes test/upgrade/release-sql/<version>.json, the SQL this release
 * issues and the event and message schema versions it reads (ADR 0039). Take it when a release is cut:
 * the next release's tests PREPARE every statement of it against their schema (expand/contract), and
 * refuse to write an event or message version it cannot read.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, releaseSnapshot, SNAPSHOT_DIR } from '../test/upgrade/release-sql.js';

const version =
  process.argv.slice(2).find((a) => !a.startsWith('--')) ??
  (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const path = join(SNAPSHOT_DIR, `${version}.json`);
// A released snapshot is history: the next release is checked against it as that release shipped.
if (existsSync(path) && !process.argv.includes('--force')) {
  console.error(
    `${path} exists: release ${version} was captured already (bump the version first, or --force)`,
  );
  process.exit(1);
}
const snapshot = await releaseSnapshot(version);
mkdirSync(SNAPSHOT_DIR, { recursive: true });
writeFileSync(path, `${JSON.stringify(snapshot, null, 2)}\n`);
console.log(
  `${path}: ${snapshot.statements.length} statements, ${snapshot.migrations.length} migrations, ${snapshot.unresolved.length} unresolved templates`,
);
