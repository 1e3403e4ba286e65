/**
 * Bearer JWTs of the configured OpenID Connect issuer beside API keys (issue 25 item 2, ADR 0035). A
 * token that verifies (src/adapters/oidc/issuer.ts: signature against the issuer's JWKS, `iss`, `aud`,
 * `exp`, `nbf`, an asymmetric algorithm) becomes a Principal like a key's: the organization from
 * HERALD_API_OIDC_ORGANIZATION_CLAIM (itself, or through HERALD_API_OIDC_ORGANIZATION_MAP), the role from
 * HERALD_API_OIDC_ROLE_CLAIM through HERALD_API_OIDC_ROLE_MAP (the highest mapped role wins), and the
 * actor `oidc:<sub>` recorded on every event the request's commands append. Tenancy holds as for keys:
 * the organization scopes every read and command. A token without a mapped organization or role is a
 * 403 naming the claim (the token is genuine; its holder is just not let in), not counted as a failed
 * authentication; a token that does not verify is a 401 that is (src/api/auth-throttle.ts).
 */
import type { OidcIssuer, VerifiedToken } from '../adapters/oidc/issuer.js';
import { recordOidcSubject } from '../adapters/postgres/oidc-subject-queries.js';
import { ForbiddenError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Database } from '../ports/database.js';
import type { OidcSettings } from '../settings/oidc.js';
import type { ApiKeyRole, Principal } from './auth.js';

export const OIDC_ACTOR_PREFIX = 'oidc:';

const RANK: Readonly<Record<ApiKeyRole, number>> = { viewer: 0, operator: 1, admin: 2 };

/** A compact JWS: three base64url parts (the last empty for `alg: none`, refused when verified). */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export const looksLikeJwt = (token: string): boolean => COMPACT_JWS.test(token);

/** A claim's value at a name; a dotted name (`realm_access.roles`) walks nested objects. */
function claimAt(claims: Record<string, unknown>, name: string): unknown {
  if (name in claims) return claims[name];
  let value: unknown = claims;
  for (const part of name.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** The organization, role and name a verified token's claims map to; 403 naming the claim otherwise. */
export function mapClaims(
  claims: Record<string, unknown>,
  settings: Pick<
    OidcSettings,
    'organizationClaim' | 'organizationMap' | 'roleClaim' | 'roleMap' | 'nameClaim'
  >,
): { organizationId: string; role: ApiKeyRole; name: string | null } {
  const tenant = claimAt(claims, settings.organizationClaim);
  if (typeof tenant !== 'string' || tenant.length === 0 || tenant.length > 200) {
    throw new ForbiddenError(
      `the token has no organization: claim '${settings.organizationClaim}' (HERALD_API_OIDC_ORGANIZATION_CLAIM) must be a string of 1 to 200 characters`,
      { claim: settings.organizationClaim },
    );
  }
  const organizationId = settings.organizationMap ? settings.organizationMap.get(tenant) : tenant;
  if (organizationId === undefined) {
    throw new ForbiddenError(
      `the token's organization claim '${settings.organizationClaim}' names a tenant HERALD_API_OIDC_ORGANIZATION_MAP does not map`,
      { claim: settings.organizationClaim },
    );
  }
  const given = claimAt(claims, settings.roleClaim);
  const values = typeof given === 'string' ? given.split(' ') : Array.isArray(given) ? given : [];
  let role: ApiKeyRole | undefined;
  for (const value of values) {
    const mapped = typeof value === 'string' ? settings.roleMap.get(value) : undefined;
    if (mapped && (role === undefined || RANK[mapped] > RANK[role])) role = mapped;
  }
  if (role === undefined) {
    throw new ForbiddenError(
      `the token has no Herald role: claim '${settings.roleClaim}' (HERALD_API_OIDC_ROLE_CLAIM) holds no role HERALD_API_OIDC_ROLE_MAP maps`,
      { claim: settings.roleClaim },
    );
  }
  const name = claimAt(claims, settings.nameClaim);
  return {
    organizationId,
    role,
    name: typeof name === 'string' && name.length > 0 ? name.slice(0, 200) : null,
  };
}

/** The Principal of a token's subject with its mapped organization and role. */
export function subjectPrincipal(
  subject: string,
  mapped: { organizationId: string; role: ApiKeyRole; name: string | null },
): Principal {
  const actor = `${OIDC_ACTOR_PREFIX}${subject}`;
  return {
    keyId: actor,
    organizationId: mapped.organizationId,
    role: mapped.role,
    actor,
    subject,
    name: mapped.name,
  };
}

export class JwtAuthenticator {
  /** `org\0sub\0name\0role` → when this process last recorded it (epoch ms), so most requests skip the write. */
  private readonly recorded = new Map<string, number>();

  constructor(
    readonly issuer: OidcIssuer,
    readonly settings: OidcSettings,
    private readonly db: Database,
    private readonly logger: Logger,
  ) {}

  /** A bearer JWT's caller: 401 (InvalidTokenError) when it does not verify, 403 when it maps to no one. */
  async authenticate(token: string): Promise<Principal> {
    return this.principalOf(await this.issuer.verifyAccessToken(token));
  }

  /** The Principal of verified claims (an access token's, or a dashboard sign-in's ID token). */
  principalOf(claims: VerifiedToken): Principal {
    const principal = subjectPrincipal(claims.sub, mapClaims(claims, this.settings));
    this.recordUse(principal);
    return principal;
  }

  private recordUse(principal: Principal): void {
    const key = [principal.organizationId, principal.subject, principal.name, principal.role].join('\0');
    const now = Date.now();
    if (now - (this.recorded.get(key) ?? 0) < 60_000) return;
    this.recorded.set(key, now);
    if (this.recorded.size > 10_000) this.recorded.clear();
    recordOidcSubject(this.db, {
      organizationId: principal.organizationId,
      subject: principal.subject!,
      name: principal.name ?? null,
      role: principal.role,
    }).catch((error: unknown) => {
      this.recorded.delete(key);
      this.logger.warn({ err: error, subject: principal.subject }, 'could not record the token subject');
    });
  }
}
