/**
 * A test OpenID Connect issuer on a real loopback socket (ADR 0035): the discovery document, the JWKS
 * (an RS256 and an ES256 key at first; `rotate()` adds a new key and signs with it, `retire(kid)` drops
 * one from the set), tokens signed for tests (any claims, any of its keys, or deliberately broken ones),
 * and the authorization and token endpoints of the authorization-code flow with PKCE: `/authorize`
 * signs in `user` at once (no login page) and redirects back with a one-time code; `/token` checks the
 * client id, the redirect URI and the S256 code verifier before answering an ID token (with the nonce)
 * and an access token. Every request is recorded, so a test can see what the API asked.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';

type Alg = 'RS256' | 'ES256';

interface IssuerKey {
  kid: string;
  alg: Alg;
  privateKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
  publicJwk: JWK;
}

export interface TestUser {
  sub: string;
  claims: Record<string, unknown>;
}

export interface TestIssuer {
  url: string;
  /** The key ids the JWKS serves now, newest last. */
  kids(): string[];
  /** The key tokens are signed with unless told otherwise. */
  signingKid: string;
  /** Signs a token: issuer, `iat`, `exp` in 5 minutes by default; `claims` override any of them. */
  sign(
    claims: JWTPayload,
    options?: { kid?: string; alg?: Alg; header?: Record<string, unknown> },
  ): Promise<string>;
  /** The public JWK of a key (for the HS256-with-the-public-key attack). */
  publicJwk(kid: string): JWK;
  /** Adds a new key of `alg` to the JWKS and makes it the signing key; answers its kid. */
  rotate(alg?: Alg): Promise<string>;
  /** Drops a key from the JWKS. */
  retire(kid: string): void;
  /** Who `/authorize` signs in next. */
  user: TestUser;
  /** Requests received, `GET /jwks` etc. */
  requests: string[];
  close(): Promise<void>;
}

async function newKey(alg: Alg): Promise<IssuerKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const kid = `${alg.toLowerCase()}-${randomBytes(4).toString('hex')}`;
  return { kid, alg, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } };
}

async function bodyOf(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startTestIssuer(
  options: { clientId?: string; audience?: string; user?: TestUser } = {},
): Promise<TestIssuer> {
  const clientId = options.clientId ?? 'herald-dashboard';
  const keys: IssuerKey[] = [await newKey('RS256'), await newKey('ES256')];
  const retired = new Map<string, IssuerKey>();
  const codes = new Map<
    string,
    { clientId: string; redirectUri: string; challenge: string; nonce: string | undefined; user: TestUser }
  >();
  const requests: string[] = [];
  let url = '';
  const keyOf = (kid: string) => keys.find((k) => k.kid === kid) ?? retired.get(kid);

  const issuer: TestIssuer = {
    get url() {
      return url;
    },
    kids: () => keys.map((k) => k.kid),
    signingKid: keys[0]!.kid,
    user: options.user ?? { sub: 'user-1', claims: {} },
    requests,
    async sign(claims, signOptions = {}) {
      const key = keyOf(signOptions.kid ?? issuer.signingKid);
      if (!key) throw new Error(`no key ${signOptions.kid}`);
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ iss: url, iat: now, exp: now + 300, ...claims })
        .setProtectedHeader({
          alg: signOptions.alg ?? key.alg,
          kid: key.kid,
          typ: 'JWT',
          ...signOptions.header,
        })
        .sign(key.privateKey);
    },
    publicJwk(kid) {
      const key = keyOf(kid);
      if (!key) throw new Error(`no key ${kid}`);
      return key.publicJwk;
    },
    async rotate(alg = 'RS256') {
      const key = await newKey(alg);
      keys.push(key);
      issuer.signingKid = key.kid;
      return key.kid;
    },
    retire(kid) {
      const at = keys.findIndex((k) => k.kid === kid);
      if (at >= 0) retired.set(kid, keys.splice(at, 1)[0]!);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const json = (response: import('node:http').ServerResponse, status: number, body: unknown) => {
    response.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    response.end(JSON.stringify(body));
  };

  const server: Server = createServer((request, response) => {
    const target = new URL(request.url ?? '/', url);
    requests.push(`${request.method} ${target.pathname}`);
    void (async () => {
      if (request.method === 'GET' && target.pathname === '/.well-known/openid-configuration') {
        return json(response, 200, {
          issuer: url,
          jwks_uri: `${url}/jwks`,
          authorization_endpoint: `${url}/authorize`,
          token_endpoint: `${url}/token`,
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256', 'ES256'],
          code_challenge_methods_supported: ['S256'],
          grant_types_supported: ['authorization_code'],
        });
      }
      if (request.method === 'GET' && target.pathname === '/jwks') {
        return json(response, 200, { keys: keys.map((k) => k.publicJwk) });
      }
      if (request.method === 'GET' && target.pathname === '/authorize') {
        const q = target.searchParams;
        const redirectUri = q.get('redirect_uri') ?? '';
        const challenge = q.get('code_challenge') ?? '';
        if (
          q.get('response_type') !== 'code' ||
          q.get('client_id') !== clientId ||
          q.get('code_challenge_method') !== 'S256' ||
          !/^[A-Za-z0-9_-]{43}$/.test(challenge) ||
          !redirectUri ||
          !(q.get('scope') ?? '').split(' ').includes('openid')
        ) {
          return json(response, 400, { error: 'invalid_request' });
        }
        const code = randomBytes(16).toString('base64url');
        codes.set(code, {
          clientId,
          redirectUri,
          challenge,
          nonce: q.get('nonce') ?? undefined,
          user: issuer.user,
        });
        const back = new URL(redirectUri);
        back.searchParams.set('code', code);
        back.searchParams.set('state', q.get('state') ?? '');
        response.writeHead(302, { location: back.toString() });
        return response.end();
      }
      if (request.method === 'POST' && target.pathname === '/token') {
        const form = new URLSearchParams(await bodyOf(request));
        const code = form.get('code') ?? '';
        const grant = codes.get(code);
        codes.delete(code); // one use
        const verifier = form.get('code_verifier') ?? '';
        const challenge = createHash('sha256').update(verifier).digest('base64url');
        if (
          form.get('grant_type') !== 'authorization_code' ||
          !grant ||
          form.get('client_id') !== grant.clientId ||
          form.get('redirect_uri') !== grant.redirectUri ||
          challenge !== grant.challenge
        ) {
          return json(response, 400, { error: 'invalid_grant' });
        }
        const idToken = await issuer.sign({
          sub: grant.user.sub,
          aud: grant.clientId,
          ...(grant.nonce ? { nonce: grant.nonce } : {}),
          ...grant.user.claims,
        });
        const accessToken = await issuer.sign({
          sub: grant.user.sub,
          aud: options.audience ?? 'herald-api',
          ...grant.user.claims,
        });
        return json(response, 200, {
          token_type: 'Bearer',
          id_token: idToken,
          access_token: accessToken,
          expires_in: 300,
        });
      }
      json(response, 404, { error: 'not_found' });
    })().catch((error: unknown) => json(response, 500, { error: String(error) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return issuer;
}
