/**
 * DDL for the point-in-time sandbox (`herald replay --until <time> --into <schema>`): a NEW schema with
 * each state table created LIKE the live one (columns, defaults, keys, indexes), filled with the states
 * folded from the events recorded up to the time, plus read-only views of the event log and publish
 * receipts up to that time. Nothing here touches the live tables; the sandbox schema must not exist
 * yet (CREATE SCHEMA fails otherwise), so a mistyped name can never overwrite anything.
 */
import pg from 'pg';
import { ValidationError } from '../../errors.js';
import type { SqlClient } from '../../ports/database.js';

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

export function sandboxIdentifier(name: string, what = 'schema'): string {
  if (!IDENTIFIER.test(name)) {
    throw new ValidationError(`${what} must be a lowercase SQL identifier (a-z, 0-9, _), got '${name}'`, {
      name,
    });
  }
  return pg.escapeIdentifier(name);
}

export const createSchema = (schema: string) => `create schema ${sandboxIdentifier(schema)}`;

export const createTableLike = (into: string, live: string, table: string) =>
  `create table ${sandboxIdentifier(into)}.${sandboxIdentifier(table, 'table')}
     (like ${sandboxIdentifier(live)}.${sandboxIdentifier(table, 'table')} including all)`;

/** State inserts go to the sandbox; anything the sandbox does not have (the event log) to the live schema. */
export const setLocalSearchPath = (into: string, live: string) =>
  `set local search_path to ${sandboxIdentifier(into)}, ${sandboxIdentifier(live)}`;

export const createViewUntil = (
  into: string,
  live: string,
  table: 'event' | 'publish_receipt',
  until: string,
) =>
  `create view ${sandboxIdentifier(into)}.${table} as
     select * from ${sandboxIdentifier(live)}.${table} where recorded_at <= ${pg.escapeLiteral(until)}::timestamptz`;

export const commentOnSchema = (schema: string, text: string) =>
  `comment on schema ${sandboxIdentifier(schema)} is ${pg.escapeLiteral(text)}`;

/** Creates the sandbox schema; a ValidationError when it exists already. */
export async function createSandboxSchema(sql: SqlClient, schema: string): Promise<void> {
  try {
    await sql.query(createSchema(schema));
  } catch (error) {
    if ((error as { code?: string }).code === '42P06') {
      throw new ValidationError(`schema ${schema} already exists: drop it or choose another name`, {
        schema,
      });
    }
    throw error;
  }
}
