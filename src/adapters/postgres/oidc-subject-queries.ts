/**
 * The issuer's subjects per organization (migration 000023, ADR 0035): recorded when a token is used so
 * `GET /v1/actors` can name the actor `oidc:<sub>` by the name its token carried. The upsert writes only
 * when the name or role changed or the row was last seen over a minute ago (the guard is in the WHERE),
 * so a busy subject costs one write a minute, whatever the number of API processes.
 */
import type { SqlClient } from '../../ports/database.js';
import type { ApiKeyRole } from './api-key-queries.js';

export const RECORD_OIDC_SUBJECT = `
  insert into oidc_subject as s (organization_id, subject, name, role) values ($1, $2, $3, $4)
  on conflict (organization_id, subject) do update
     set name = excluded.name, role = excluded.role, last_seen_at = now()
   where s.name is distinct from excluded.name or s.role <> excluded.role
      or s.last_seen_at < now() - interval '1 minute'`;

/** Some subjects of an organization, by subject (the actors `oidc:<sub>` the dashboard shows). */
export const OIDC_SUBJECT_NAMES = `
  select subject, name, role from oidc_subject where organization_id = $1 and subject = any($2::text[])`;

export async function recordOidcSubject(
  sql: SqlClient,
  params: { organizationId: string; subject: string; name: string | null; role: ApiKeyRole },
): Promise<void> {
  await sql.query(RECORD_OIDC_SUBJECT, [params.organizationId, params.subject, params.name, params.role]);
}

export async function oidcSubjectNames(
  sql: SqlClient,
  organizationId: string,
  subjects: readonly string[],
): Promise<{ subject: string; name: string | null; role: ApiKeyRole }[]> {
  if (subjects.length === 0) return [];
  const { rows } = await sql.query<{ subject: string; name: string | null; role: ApiKeyRole }>(
    OIDC_SUBJECT_NAMES,
    [organizationId, subjects],
  );
  return rows;
}
