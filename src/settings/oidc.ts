/**
 * OpenID Connect sign-in beside API keys (issue 25 item 2, ADR 0035): the `HERALD_API_OIDC_*` section.
 * Setting `HERALD_API_OIDC_ISSUER` makes the API accept bearer JWTs of that issuer (verified against its
 * JWKS, claims mapped to an organization and a role); `HERALD_API_OIDC_CLIENT_ID` also lets the dashboard
 * sign in through it (authorization code with PKCE). Every combination that could not work stops startup
 * naming the variable: a lone client id, an audience-less issuer, a symmetric or `none` algorithm (a
 * public-key issuer never signs with a shared secret, and accepting HS256 would let anyone holding the
 * public key mint tokens), a role mapped to something that is not a Herald role.
 */
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { describeSetting as d, type EnvOf, type EnvSection } from './fragment.js';
import { nonNegativeInt, positiveInt, url } from './validators.js';

/** Herald's roles, as API keys have them (kept here so settings need not import the API). */
export const OIDC_HERALD_ROLES = ['viewer', 'operator', 'admin'] as const;
export type OidcHeraldRole = (typeof OIDC_HERALD_ROLES)[number];

/** Asymmetric JWS algorithms only: no `none`, no HS* (ADR 0035). */
export const OIDC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
] as const;

const claimName = z
  .string()
  .regex(/^[A-Za-z0-9_:/.$-]{1,200}$/, 'must be a claim name (1..200 of [A-Za-z0-9_:/.$-])');

export const oidcSection = {
  title: 'OpenID Connect (bearer JWTs and dashboard sign-in)',
  env: {
    HERALD_API_OIDC_ISSUER: d(
      url(['https', 'http']).optional(),
      'the issuer (`iss`) whose bearer JWTs the API accepts beside API keys; its discovery document (`<issuer>/.well-known/openid-configuration`) gives the JWKS and, for the dashboard, the authorization and token endpoints. Unset: API keys only',
    ),
    HERALD_API_OIDC_AUDIENCE: d(
      z.string().min(1).max(2000).optional(),
      'the `aud` a bearer JWT must carry (comma-separated: any of them); required with `HERALD_API_OIDC_ISSUER`',
    ),
    HERALD_API_OIDC_JWKS_URL: d(
      url(['https', 'http']).optional(),
      "the issuer's JWKS, when it is not the discovery document's `jwks_uri`",
      "the discovery document's `jwks_uri`",
    ),
    HERALD_API_OIDC_ALGORITHMS: d(
      z.string().min(1).default('RS256,ES256'),
      `the JWS algorithms accepted (comma-separated, among ${OIDC_ALGORITHMS.join(', ')}); \`none\` and the HS* algorithms are refused`,
    ),
    HERALD_API_OIDC_CLOCK_TOLERANCE_SECONDS: d(
      nonNegativeInt.max(300).default(30),
      'leeway for `exp`, `nbf` and `iat` against this host’s clock',
    ),
    HERALD_API_OIDC_JWKS_COOLDOWN_SECONDS: d(
      nonNegativeInt.max(3_600).default(30),
      'a token with an unknown key id refetches the JWKS (key rotation, no restart), at most once per this many seconds',
    ),
    HERALD_API_OIDC_JWKS_MAX_AGE_SECONDS: d(
      positiveInt.max(86_400).default(600),
      'the JWKS is refetched once older than this, so a retired key stops verifying within it',
    ),
    HERALD_API_OIDC_ORGANIZATION_CLAIM: d(
      claimName.default('herald_organization'),
      'the claim that names the organization (a string)',
    ),
    HERALD_API_OIDC_ORGANIZATION_MAP: d(
      z.string().max(20_000).optional(),
      'external tenant id → Herald organization, `tenant=organization` pairs separated by commas; when set, only mapped tenants are accepted. Unset: the claim is the organization id',
    ),
    HERALD_API_OIDC_ROLE_CLAIM: d(
      claimName.default('herald_roles'),
      'the claim with the role (a string or an array of strings; the highest mapped role wins)',
    ),
    HERALD_API_OIDC_ROLE_MAP: d(
      z.string().min(1).max(20_000).default('admin=admin,operator=operator,viewer=viewer'),
      'external role → Herald role (`viewer`, `operator`, `admin`), `external=role` pairs separated by commas; a token with no mapped role is refused (403)',
    ),
    HERALD_API_OIDC_NAME_CLAIM: d(
      claimName.default('name'),
      'the claim shown as the actor’s name (`GET /v1/actors`); the subject when absent',
    ),
    HERALD_API_OIDC_CLIENT_ID: d(
      z.string().min(1).max(500).optional(),
      'the dashboard’s client id at the issuer: the sign-in page then offers “Sign in with <issuer>” (authorization code with PKCE, exchanged by the API; tokens never reach the page)',
    ),
    HERALD_API_OIDC_CLIENT_SECRET: d(
      z.string().min(1).max(2000).optional(),
      'the client secret, for an issuer that treats the dashboard as a confidential client (sent with `client_secret_basic`); unset: a public client (PKCE only)',
    ),
    HERALD_API_OIDC_SCOPES: d(
      z.string().min(1).max(1000).default('openid profile email'),
      'the scopes the dashboard asks for (space-separated; must include `openid`)',
    ),
    HERALD_API_OIDC_REDIRECT_URL: d(
      url(['https', 'http']).optional(),
      'the callback registered at the issuer, ending in `/v1/session/oidc/callback`',
      '`<request origin>/v1/session/oidc/callback`',
    ),
    HERALD_API_OIDC_DISPLAY_NAME: d(
      z.string().min(1).max(100).optional(),
      'what the sign-in button names (“Sign in with …”)',
      "the issuer's host",
    ),
  },
  secretVariables: ['HERALD_API_OIDC_CLIENT_SECRET'],
} satisfies EnvSection;

export type OidcEnv = EnvOf<typeof oidcSection.env>;

/** The dashboard's authorization-code sign-in (present when a client id is configured). */
export interface OidcClientSettings {
  readonly clientId: string;
  readonly clientSecret: string | undefined;
  readonly scopes: string;
  /** Unset: derived from each request's origin. */
  readonly redirectUrl: string | undefined;
}

export interface OidcSettings {
  readonly issuer: string;
  readonly audiences: readonly string[];
  readonly jwksUrl: string | undefined;
  readonly algorithms: readonly (typeof OIDC_ALGORITHMS)[number][];
  readonly clockToleranceSeconds: number;
  readonly jwksCooldownMs: number;
  readonly jwksMaxAgeMs: number;
  readonly organizationClaim: string;
  /** External tenant → organization; undefined: the claim is the organization id. */
  readonly organizationMap: ReadonlyMap<string, string> | undefined;
  readonly roleClaim: string;
  readonly roleMap: ReadonlyMap<string, OidcHeraldRole>;
  readonly nameClaim: string;
  readonly displayName: string;
  readonly client: OidcClientSettings | undefined;
}

/** `a=b,c=d` → pairs; throws ConfigError naming `field` on a malformed or repeated pair. */
function pairs(field: string, text: string): [string, string][] {
  const seen = new Set<string>();
  return text
    .split(',')
    .map((pair) => pair.trim())
    .filter(Boolean)
    .map((pair) => {
      const at = pair.lastIndexOf('=');
      const from = pair.slice(0, at).trim();
      const to = pair.slice(at + 1).trim();
      if (at <= 0 || !to) throw new ConfigError(field, `'${pair}' is not an external=herald pair`);
      if (seen.has(from)) throw new ConfigError(field, `'${from}' is mapped twice`);
      seen.add(from);
      return [from, to];
    });
}

/** The OIDC settings (undefined when no issuer is set); throws ConfigError naming the variable. */
export function oidcSettings(e: OidcEnv): OidcSettings | undefined {
  if (e.HERALD_API_OIDC_ISSUER === undefined) {
    const lone = (
      [
        'HERALD_API_OIDC_AUDIENCE',
        'HERALD_API_OIDC_JWKS_URL',
        'HERALD_API_OIDC_ORGANIZATION_MAP',
        'HERALD_API_OIDC_CLIENT_ID',
        'HERALD_API_OIDC_CLIENT_SECRET',
        'HERALD_API_OIDC_REDIRECT_URL',
        'HERALD_API_OIDC_DISPLAY_NAME',
      ] as const
    ).find((name) => e[name] !== undefined);
    if (lone) throw new ConfigError(lone, 'needs HERALD_API_OIDC_ISSUER');
    return undefined;
  }
  const issuer = e.HERALD_API_OIDC_ISSUER;
  if (e.HERALD_API_OIDC_AUDIENCE === undefined) {
    throw new ConfigError(
      'HERALD_API_OIDC_AUDIENCE',
      'is required with HERALD_API_OIDC_ISSUER (the `aud` tokens for this API carry)',
    );
  }
  const audiences = e.HERALD_API_OIDC_AUDIENCE.split(',')
    .map((a) => a.trim())
    .filter(Boolean);
  if (audiences.length === 0) throw new ConfigError('HERALD_API_OIDC_AUDIENCE', 'names no audience');
  const algorithms = e.HERALD_API_OIDC_ALGORITHMS.split(',').map((a) => a.trim());
  for (const algorithm of algorithms) {
    if (!(OIDC_ALGORITHMS as readonly string[]).includes(algorithm)) {
      throw new ConfigError(
        'HERALD_API_OIDC_ALGORITHMS',
        /^(none|HS\d+)$/i.test(algorithm)
          ? `'${algorithm}' is refused: only asymmetric algorithms verify against an issuer's published keys`
          : `'${algorithm}' is not one of ${OIDC_ALGORITHMS.join(', ')}`,
      );
    }
  }
  const organizationMap =
    e.HERALD_API_OIDC_ORGANIZATION_MAP === undefined
      ? undefined
      : new Map(pairs('HERALD_API_OIDC_ORGANIZATION_MAP', e.HERALD_API_OIDC_ORGANIZATION_MAP));
  if (organizationMap?.size === 0)
    throw new ConfigError('HERALD_API_OIDC_ORGANIZATION_MAP', 'maps no tenant');
  const roleMap = new Map<string, OidcHeraldRole>();
  for (const [from, to] of pairs('HERALD_API_OIDC_ROLE_MAP', e.HERALD_API_OIDC_ROLE_MAP)) {
    if (!(OIDC_HERALD_ROLES as readonly string[]).includes(to)) {
      throw new ConfigError(
        'HERALD_API_OIDC_ROLE_MAP',
        `'${to}' is not a Herald role (${OIDC_HERALD_ROLES.join(', ')})`,
      );
    }
    roleMap.set(from, to as OidcHeraldRole);
  }
  if (roleMap.size === 0) throw new ConfigError('HERALD_API_OIDC_ROLE_MAP', 'maps no role');
  let client: OidcClientSettings | undefined;
  if (e.HERALD_API_OIDC_CLIENT_ID !== undefined) {
    if (!e.HERALD_API_OIDC_SCOPES.split(/\s+/).includes('openid')) {
      throw new ConfigError(
        'HERALD_API_OIDC_SCOPES',
        "must include 'openid' (the dashboard signs in with an ID token)",
      );
    }
    const redirect = e.HERALD_API_OIDC_REDIRECT_URL;
    if (redirect !== undefined && new URL(redirect).pathname !== '/v1/session/oidc/callback') {
      throw new ConfigError(
        'HERALD_API_OIDC_REDIRECT_URL',
        'must end in /v1/session/oidc/callback (the API’s callback)',
      );
    }
    client = {
      clientId: e.HERALD_API_OIDC_CLIENT_ID,
      clientSecret: e.HERALD_API_OIDC_CLIENT_SECRET,
      scopes: e.HERALD_API_OIDC_SCOPES,
      redirectUrl: redirect,
    };
  } else {
    const lone = (['HERALD_API_OIDC_CLIENT_SECRET', 'HERALD_API_OIDC_REDIRECT_URL'] as const).find(
      (name) => e[name] !== undefined,
    );
    if (lone) throw new ConfigError(lone, 'needs HERALD_API_OIDC_CLIENT_ID');
  }
  return {
    issuer,
    audiences,
    jwksUrl: e.HERALD_API_OIDC_JWKS_URL,
    algorithms: algorithms as OidcSettings['algorithms'],
    clockToleranceSeconds: e.HERALD_API_OIDC_CLOCK_TOLERANCE_SECONDS,
    jwksCooldownMs: e.HERALD_API_OIDC_JWKS_COOLDOWN_SECONDS * 1000,
    jwksMaxAgeMs: e.HERALD_API_OIDC_JWKS_MAX_AGE_SECONDS * 1000,
    organizationClaim: e.HERALD_API_OIDC_ORGANIZATION_CLAIM,
    organizationMap,
    roleClaim: e.HERALD_API_OIDC_ROLE_CLAIM,
    roleMap,
    nameClaim: e.HERALD_API_OIDC_NAME_CLAIM,
    displayName: e.HERALD_API_OIDC_DISPLAY_NAME ?? new URL(issuer).host,
    client,
  };
}

/** OIDC settings that work but weaken a guarantee (logged by every role at start-up). */
export function oidcWarnings(e: OidcEnv): string[] {
  const issuer = e.HERALD_API_OIDC_ISSUER;
  if (issuer === undefined || !issuer.startsWith('http://')) return [];
  const host = new URL(issuer).hostname;
  if (host === '127.0.0.1' || host === 'localhost' || host === '[::1]') return [];
  return [
    `HERALD_API_OIDC_ISSUER (${issuer}) is plain http: its discovery document and keys can be altered on the way, and with them which tokens verify`,
  ];
}
