/**
 * The `HERALD_API_OIDC_*` settings (ADR 0035) and the claim mapping they drive: off by default; an
 * issuer needs an audience; `none` and HS* algorithms, a role mapped to no Herald role, a client setting
 * without a client id or anything without an issuer stop start-up naming the variable; the client secret
 * is a secret the logger scrubs. The mapping: organization from its claim (or through the tenant map),
 * the highest mapped role, a 403 naming the claim otherwise.
 */
import { describe, expect, it } from 'vitest';
import { mapClaims } from '../../src/api/oidc-auth.js';
import { loadConfig } from '../../src/config.js';
import { ForbiddenError } from '../../src/errors.js';
import { configRefusal } from '../support/config.js';

const base = { DATABASE_URL: 'postgres://herald@127.0.0.1:5432/herald' };
const oidc = {
  ...base,
  HERALD_API_OIDC_ISSUER: 'https://login.example.com/',
  HERALD_API_OIDC_AUDIENCE: 'herald-api',
};

const refusal = configRefusal;

describe('OpenID Connect settings', () => {
  it('are off without an issuer', () => {
    expect(loadConfig(base).api.oidc).toBeUndefined();
  });

  it('an issuer with an audience: RS256 and ES256, the default claims and role map, no dashboard client', () => {
    const settings = loadConfig(oidc).api.oidc!;
    expect(settings.issuer).toBe('https://login.example.com/');
    expect(settings.audiences).toEqual(['herald-api']);
    expect(settings.algorithms).toEqual(['RS256', 'ES256']);
    expect(settings.organizationClaim).toBe('herald_organization');
    expect(settings.roleClaim).toBe('herald_roles');
    expect([...settings.roleMap]).toEqual([
      ['admin', 'admin'],
      ['operator', 'operator'],
      ['viewer', 'viewer'],
    ]);
    expect(settings.client).toBeUndefined();
    expect(settings.displayName).toBe('login.example.com');
  });

  it('refuses what cannot work, naming the variable', () => {
    expect(refusal({ ...base, HERALD_API_OIDC_CLIENT_ID: 'x' }).field).toBe('HERALD_API_OIDC_CLIENT_ID');
    expect(refusal({ ...base, HERALD_API_OIDC_AUDIENCE: 'x' }).field).toBe('HERALD_API_OIDC_AUDIENCE');
    expect(refusal({ ...oidc, HERALD_API_OIDC_AUDIENCE: '' }).field).toBe('HERALD_API_OIDC_AUDIENCE');
    const { HERALD_API_OIDC_AUDIENCE: _, ...noAudience } = oidc;
    expect(refusal(noAudience).field).toBe('HERALD_API_OIDC_AUDIENCE');
    for (const algorithms of ['HS256', 'none', 'RS256,HS512', 'RS1']) {
      const error = refusal({ ...oidc, HERALD_API_OIDC_ALGORITHMS: algorithms });
      expect(error.field).toBe('HERALD_API_OIDC_ALGORITHMS');
    }
    expect(refusal({ ...oidc, HERALD_API_OIDC_ALGORITHMS: 'none' }).message).toContain('asymmetric');
    expect(refusal({ ...oidc, HERALD_API_OIDC_ROLE_MAP: 'ops=superuser' }).field).toBe(
      'HERALD_API_OIDC_ROLE_MAP',
    );
    expect(refusal({ ...oidc, HERALD_API_OIDC_ROLE_MAP: 'ops' }).field).toBe('HERALD_API_OIDC_ROLE_MAP');
    expect(refusal({ ...oidc, HERALD_API_OIDC_ORGANIZATION_MAP: 't1=a,t1=b' }).field).toBe(
      'HERALD_API_OIDC_ORGANIZATION_MAP',
    );
    expect(refusal({ ...oidc, HERALD_API_OIDC_CLIENT_SECRET: 's' }).field).toBe(
      'HERALD_API_OIDC_CLIENT_SECRET',
    );
    expect(
      refusal({ ...oidc, HERALD_API_OIDC_CLIENT_ID: 'c', HERALD_API_OIDC_SCOPES: 'profile' }).field,
    ).toBe('HERALD_API_OIDC_SCOPES');
    expect(
      refusal({
        ...oidc,
        HERALD_API_OIDC_CLIENT_ID: 'c',
        HERALD_API_OIDC_REDIRECT_URL: 'https://h.example/cb',
      }).field,
    ).toBe('HERALD_API_OIDC_REDIRECT_URL');
    expect(refusal({ ...oidc, HERALD_API_OIDC_ISSUER: 'login.example.com' }).field).toBe(
      'HERALD_API_OIDC_ISSUER',
    );
  });

  it('warns about a plain-http issuer that is not on this host', () => {
    expect(loadConfig(oidc).warnings.join()).not.toContain('HERALD_API_OIDC_ISSUER');
    expect(
      loadConfig({ ...oidc, HERALD_API_OIDC_ISSUER: 'http://127.0.0.1:8081' }).warnings.join(),
    ).not.toContain('HERALD_API_OIDC_ISSUER');
    expect(loadConfig({ ...oidc, HERALD_API_OIDC_ISSUER: 'http://sso.internal' }).warnings.join()).toContain(
      'HERALD_API_OIDC_ISSUER (http://sso.internal) is plain http',
    );
  });

  it('the dashboard client: its secret is scrubbed from logs', () => {
    const config = loadConfig({
      ...oidc,
      HERALD_API_OIDC_CLIENT_ID: 'dash',
      HERALD_API_OIDC_CLIENT_SECRET: 'shh-123',
    });
    expect(config.api.oidc!.client).toEqual({
      clientId: 'dash',
      clientSecret: 'shh-123',
      scopes: 'openid profile email',
      redirectUrl: undefined,
    });
    expect(config.secrets).toContain('shh-123');
  });
});

describe('claims → organization and role', () => {
  const settings = loadConfig({
    ...oidc,
    HERALD_API_OIDC_ROLE_CLAIM: 'realm_access.roles',
    HERALD_API_OIDC_ROLE_MAP: 'herald-viewer=viewer,herald-operator=operator,herald-admin=admin',
  }).api.oidc!;

  it('reads the organization claim and the highest mapped role (nested claim names walk objects)', () => {
    expect(
      mapClaims(
        {
          herald_organization: 'org-a',
          realm_access: { roles: ['herald-viewer', 'herald-admin', 'x'] },
          name: 'A',
        },
        settings,
      ),
    ).toEqual({ organizationId: 'org-a', role: 'admin', name: 'A' });
    expect(
      mapClaims({ herald_organization: 'org-a', realm_access: { roles: 'herald-operator' } }, settings),
    ).toEqual({ organizationId: 'org-a', role: 'operator', name: null });
  });

  it('maps an external tenant through the organization map, and refuses an unmapped one', () => {
    const mapped = { ...settings, organizationMap: new Map([['tenant-42', 'org-b']]) };
    const roles = { realm_access: { roles: ['herald-viewer'] } };
    expect(mapClaims({ herald_organization: 'tenant-42', ...roles }, mapped).organizationId).toBe('org-b');
    expect(() => mapClaims({ herald_organization: 'org-b', ...roles }, mapped)).toThrow(ForbiddenError);
  });

  it('refuses a token without an organization or a mapped role: 403 naming the claim', () => {
    const noOrg = () => mapClaims({ realm_access: { roles: ['herald-viewer'] } }, settings);
    expect(noOrg).toThrow(ForbiddenError);
    expect(noOrg).toThrow("'herald_organization'");
    const noRole = () =>
      mapClaims({ herald_organization: 'org-a', realm_access: { roles: ['guest'] } }, settings);
    expect(noRole).toThrow("'realm_access.roles'");
  });
});
