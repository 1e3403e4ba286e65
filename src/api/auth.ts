/**
 * API keys (tenancy, ADR 0012): every request authenticates with `Authorization: Bearer <key>` and acts
 * as the key's organization with the key's role — viewer reads, operator also runs commands, admin
 * also manages keys. A key is `hk_<8 hex, shown in lists>_<43 base64url chars: 256 random bits>`, and
 * only its SHA-256 is stored: a slow password hash protects guessable secrets, and a 256-bit random
 * one is not guessable, so one fast hash and one index probe per request are enough. The key's id is
 * the actor of every command it causes (`api-key:<id>`); its last use is recorded at most once a
 * minute (guarded in SQL, and not even attempted more often by one process).
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import {
  type ApiKeyRecord,
  type ApiKeyRole,
  findApiKeyByHash,
  insertApiKey,
  touchApiKey,
} from '../adapters/postgres/api-key-queries.js';
import { ForbiddenError, UnauthenticatedError, ValidationError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Database, SqlClient } from '../ports/database.js';

export { API_KEY_ROLES, type ApiKeyRecord, type ApiKeyRole } from '../adapters/postgres/api-key-queries.js';

/** What a route needs of its caller's role. */
export type Permission = 'read' | 'command' | 'admin';

const GRANTS: Readonly<Record<ApiKeyRole, readonly Permission[]>> = {
  viewer: ['read'],
  operator: ['read', 'command'],
  admin: ['read', 'command', 'admin'],
};

export interface Principal {
  keyId: string;
  organizationId: string;
  role: ApiKeyRole;
  /** Recorded as the actor of every event the request's commands append. */
  actor: string;
  /** A bearer JWT's (or an issuer sign-in's) subject; absent for an API key (ADR 0035). */
  subject?: string;
  /** The subject's name from the token (HERALD_API_OIDC_NAME_CLAIM), when it has one. */
  name?: string | null;
}

const KEY_FORMAT = /^hk_([0-9a-f]{8})_[A-Za-z0-9_-]{43}$/;

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/** Creates a key; the returned `key` is the only time the secret exists outside the caller's hands. */
export async function createApiKey(
  sql: SqlClient,
  params: { organizationId: string; role: ApiKeyRole; name?: string; createdBy: string | null },
): Promise<{ record: ApiKeyRecord; key: string }> {
  const organizationId = params.organizationId.trim();
  if (organizationId.length === 0 || organizationId.length > 200) {
    throw new ValidationError('an organization id of 1 to 200 characters is required', {
      field: 'organization',
    });
  }
  const name = (params.name ?? '').trim() || `${params.role} key`;
  if (name.length > 200) throw new ValidationError('a key name is at most 200 characters', { field: 'name' });
  const prefix = randomBytes(4).toString('hex');
  const key = `hk_${prefix}_${randomBytes(32).toString('base64url')}`;
  const record = await insertApiKey(sql, {
    id: randomUUID(),
    organizationId,
    role: params.role,
    name,
    prefix: `hk_${prefix}`,
    secretHash: hashApiKey(key),
    createdBy: params.createdBy,
  });
  return { record, key };
}

export function permits(role: ApiKeyRole, permission: Permission): boolean {
  return GRANTS[role].includes(permission);
}

export function requirePermission(principal: Principal, permission: Permission): void {
  if (!permits(principal.role, permission)) {
    throw new ForbiddenError(
      `a ${principal.role} key cannot ${permission === 'admin' ? 'manage API keys' : 'run commands'}`,
      {
        role: principal.role,
        needs: permission,
      },
    );
  }
}

/** Every request's authentication: the key's hash looked up, its last use recorded now and then. */
export class ApiKeyAuthenticator {
  /** keyId → when this process last recorded a use (epoch ms), so most requests skip the write. */
  private readonly touched = new Map<string, number>();

  constructor(
    private readonly db: Database,
    private readonly logger: Logger,
  ) {}

  async authenticate(authorization: string | undefined): Promise<Principal> {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!match) throw new UnauthenticatedError('an API key is required: Authorization: Bearer <key>');
    const key = match[1]!;
    if (!KEY_FORMAT.test(key)) throw new UnauthenticatedError('the API key is not valid');
    const record = await findApiKeyByHash(this.db, hashApiKey(key));
    if (!record) throw new UnauthenticatedError('the API key is not valid');
    if (record.revokedAt !== null) throw new UnauthenticatedError('the API key was revoked');
    this.recordUse(record.id);
    return {
      keyId: record.id,
      organizationId: record.organizationId,
      role: record.role,
      actor: `api-key:${record.id}`,
    };
  }

  private recordUse(keyId: string): void {
    const now = Date.now();
    if (now - (this.touched.get(keyId) ?? 0) < 60_000) return;
    this.touched.set(keyId, now);
    if (this.touched.size > 10_000) this.touched.clear(); // bounded; a cleared key is touched once more
    touchApiKey(this.db, keyId).catch((error: unknown) => {
      this.touched.delete(keyId);
      this.logger.warn({ err: error, keyId }, 'could not record the API key use');
    });
  }
}
