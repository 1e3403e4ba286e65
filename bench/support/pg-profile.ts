/**
 * The PostgreSQL durability profile a benchmark ran under (scripts/services: HERALD_SERVICES_PG_DURABLE=1
 * gives production's fsync, synchronous_commit and full_page_writes; without it the fast throwaway
 * profile of tests), read from the server itself, for the benchmark's output.
 */
import type { Database } from '../../src/ports/database.js';

export interface DurabilityProfile {
  fsync: string;
  synchronousCommit: string;
  fullPageWrites: string;
  /** `durable` when every commit is flushed (fsync and synchronous_commit on), else `fast`. */
  name: 'durable' | 'fast';
  /** `postgres: fsync=on synchronous_commit=on full_page_writes=on (durable profile)` */
  line: string;
}

export async function durabilityProfile(db: Database): Promise<DurabilityProfile> {
  const show = async (name: string) =>
    (await db.query<Record<string, string>>(`show ${name}`)).rows[0]![name]!;
  const fsync = await show('fsync');
  const synchronousCommit = await show('synchronous_commit');
  const fullPageWrites = await show('full_page_writes');
  const name = fsync === 'on' && synchronousCommit !== 'off' ? 'durable' : 'fast';
  const version = (await db.query<{ v: string }>("select split_part(version(), ' ', 2) as v")).rows[0]!.v;
  return {
    fsync,
    synchronousCommit,
    fullPageWrites,
    name,
    line: `postgres ${version}: fsync=${fsync} synchronous_commit=${synchronousCommit} full_page_writes=${fullPageWrites} (${name} profile)`,
  };
}
