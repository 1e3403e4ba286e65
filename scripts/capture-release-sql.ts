/**
 * `npm run upgrade:capture-sql`: writes test/upgrade/release-sql/<version>.json, the SQL this release
 * issues and the event and message schema versions it reads (ADR 0039). Take it when a release is cut:
 * the next release's tests PREPARE every statement of it against their schema (expand/contract), and
 * refuse to write an event or message version it cannot read.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, releaseSnapshot, SNAPSHOT_DIR } from '../test/upgrade/release-sql.js';

const version =
  process.argv[2] ??
  (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const snapshot = await releaseSnapshot(version);
mkdirSync(SNAPSHOT_DIR, { recursive: true });
const path = join(SNAPSHOT_DIR, `${version}.json`);
writeFileSync(path, `${JSON.stringify(snapshot, null, 2)}\n`);
console.log(
  `${path}: ${snapshot.statements.length} statements, ${snapshot.migrations.length} migrations, ${snapshot.unresolved.length} unresolved templates`,
);
