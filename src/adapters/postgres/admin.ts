/**
 * Database administration for the demo and test fixtures: creating and dropping whole databases on
 * the server behind an admin URL. Never used by the roles in production.
 */
import pg from 'pg';
import { postgresTls, translateDatabaseError } from './database.js';

const DATABASE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

async function withAdmin<T>(adminUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client(postgresTls(adminUrl));
  client.on('error', () => {});
  try {
    await client.connect();
    return await work(client);
  } catch (error) {
    throw translateDatabaseError(error);
  } finally {
    await client.end().catch(() => {});
  }
}

export function databaseUrl(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Drops (terminating its sessions) and creates `name`; returns its URL. */
export async function recreateDatabase(adminUrl: string, name: string): Promise<string> {
  if (!DATABASE_NAME.test(name)) throw new Error(`invalid database name ${name}`);
  await withAdmin(adminUrl, async (client) => {
    await client.query(`drop database if exists ${name} with (force)`);
    await client.query(`create database ${name}`);
  });
  return databaseUrl(adminUrl, name);
}

export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  if (!DATABASE_NAME.test(name)) throw new Error(`invalid database name ${name}`);
  await withAdmin(adminUrl, (client) => client.query(`drop database if exists ${name} with (force)`));
}
