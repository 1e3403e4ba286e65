/**
 * Prints the PostgreSQL durability profile the next benchmark runs under (package.json's bench:* scripts
 * run this first): `fsync`, `synchronous_commit` and `full_page_writes` as the server reports them.
 * The scripts start PostgreSQL in its durable profile unless HERALD_SERVICES_PG_DURABLE=0.
 */
import { createDatabase } from '../../src/adapters/postgres/database.js';
import { requireEnv } from '../../test/support/services.js';
import { durabilityProfile } from './pg-profile.js';

const db = createDatabase({ url: requireEnv('DATABASE_URL'), schema: 'public', poolSize: 1 });
try {
  process.stdout.write(`${(await durabilityProfile(db)).line}\n`);
} finally {
  await db.close();
}
