/**
 * `herald api-keys`: the HTTP API's keys from a shell (the first admin key of an organization is made
 * here; admin keys then manage the others through `/v1/api-keys`).
 *
 *   herald api-keys create --organization <id> --role viewer|operator|admin [--name <text>] [--json]
 *   herald api-keys list [--organization <id>] [--include-revoked] [--json]
 *   herald api-keys revoke <id> [--organization <id>]
 *
 * `create` prints the key once: only its SHA-256 is stored. Exit codes: 0 done, 1 refused (no such
 * live key), 2 usage.
 */
import {
  type ApiKeyRecord,
  listAllApiKeys,
  listApiKeys,
  revokeApiKey,
} from '../adapters/postgres/api-key-queries.js';
import { isUuid } from '../adapters/postgres/state-table.js';
import { API_KEY_ROLES, type ApiKeyRole, createApiKey } from '../api/auth.js';
import type { Database } from '../ports/database.js';
import type { Role, RoleContext } from '../registry/role.js';
import { json, ORGANIZATION_OPTION, oneShot, out, parse, UsageError } from './one-shot.js';

const USAGE =
  'herald api-keys create --organization <id> --role viewer|operator|admin [--name <text>] | list [--organization <id>] [--include-revoked] | revoke <id>';

const OPTIONS = {
  ...ORGANIZATION_OPTION,
  role: { type: 'string' },
  name: { type: 'string' },
  'include-revoked': { type: 'boolean' },
  json: { type: 'boolean' },
} as const;

const line = (k: ApiKeyRecord) =>
  `${k.id} ${k.prefix} ${k.organizationId} ${k.role.padEnd(8)} ${k.revokedAt ? `revoked ${k.revokedAt}` : 'live'} ` +
  `created ${k.createdAt} last used ${k.lastUsedAt ?? 'never'} "${k.name}"`;

async function apiKeysCommand(context: RoleContext, db: Database): Promise<number> {
  const { values, positionals } = parse(context.argv, OPTIONS);
  const [sub, ...rest] = positionals;
  switch (sub) {
    case 'create': {
      if (!values.organization) throw new UsageError('--organization is required');
      const role = values.role as ApiKeyRole | undefined;
      if (!role || !API_KEY_ROLES.includes(role)) {
        throw new UsageError(`--role must be one of ${API_KEY_ROLES.join(', ')}`);
      }
      const { record, key } = await createApiKey(db, {
        organizationId: values.organization,
        role,
        ...(values.name ? { name: values.name } : {}),
        createdBy: `cli:${context.config.pod}`,
      });
      if (values.json) out(json({ apiKey: record, key }));
      else {
        out(line(record));
        out(`key: ${key}`);
        out('(shown once: store it now; only its hash is kept)');
      }
      return 0;
    }
    case 'list': {
      const includeRevoked = values['include-revoked'] === true;
      const keys = values.organization
        ? await listApiKeys(db, {
            organizationId: values.organization,
            after: null,
            includeRevoked,
            limit: 10_000,
          })
        : await listAllApiKeys(db, { includeRevoked, limit: 10_000 });
      if (values.json) out(json(keys));
      else if (keys.length === 0) out('no API keys');
      else for (const k of keys) out(line(k));
      return 0;
    }
    case 'revoke': {
      const id = rest[0];
      if (!id || !isUuid(id)) throw new UsageError('the id of the key to revoke is required');
      const revoked = await revokeApiKey(db, id, values.organization ?? null);
      if (!revoked) {
        process.stderr.write(
          `herald: no live API key ${id}${values.organization ? ` in ${values.organization}` : ''}\n`,
        );
        return 1;
      }
      out(values.json ? json(revoked) : `revoked ${line(revoked)}`);
      return 0;
    }
    default:
      throw new UsageError(sub ? `unknown subcommand '${sub}'` : 'a subcommand is required');
  }
}

export const apiKeyRoles: Record<string, Role> = {
  'api-keys': {
    summary: 'HTTP API keys: create --organization <id> --role <role> | list | revoke <id>',
    usage: USAGE,
    run: oneShot(USAGE, apiKeysCommand),
  },
};
