/**
 * The OpenID Connect issuer, over `jose` and fetch (ADR 0035): its discovery document, its JWKS (one
 * `createRemoteJWKSet`: cached, refetched when a token names an unknown key id — at most once per
 * cooldown — and when older than its max age, so a rotation needs no restart and a retired key stops
 * verifying), verification of bearer JWTs and ID tokens (`jwtVerify` with the issuer, the audience, the
 * configured asymmetric algorithms only — never `none`, never HS* — and the clock tolerance; `sub` and
 * `exp` required), and the authorization-code exchange with PKCE. Every jose or network failure leaves
 * here as a typed error: a token that does not verify is an InvalidTokenError naming why (401, counted by
 * the authentication throttle); an issuer that cannot be reached is a TransientError (503, not the
 * caller's fault and not counted).
 */
import type * as Jose from 'jose';
import type { JWTPayload, JWTVerifyGetKey } from 'jose';
import { InvalidTokenError, TransientError, UnauthenticatedError } from '../../errors.js';
import type { OidcSettings } from '../../settings/oidc.js';

/** What Herald reads of the discovery document. */
export interface IssuerMetadata {
  issuer: string;
  jwks_uri: string;
  authorization_endpoint?: string;
  token_endpoint?: string;
  end_session_endpoint?: string;
}

export type VerifiedToken = JWTPayload & { sub: string; exp: number };

export interface TokenResponse {
  idToken: string;
  accessToken: string | undefined;
  /** Seconds, as the token endpoint said (absent: the ID token's `exp` decides). */
  expiresIn: number | undefined;
}

const FETCH_TIMEOUT_MS = 5_000;

/**
 * jose, loaded on the first token rather than at every `herald` start (ADR 0025's addendum: the CLI's
 * one entry imports every adapter, and only an API with an issuer configured needs this one).
 */
let josePromise: Promise<typeof Jose> | undefined;
const loadJose = () => {
  josePromise ??= import('jose');
  return josePromise;
};

/** jose's refusal → why, in RFC 6750 words a client can act on. */
function invalidToken(joseErrors: typeof Jose.errors, error: unknown): InvalidTokenError | undefined {
  if (error instanceof joseErrors.JWTExpired) return new InvalidTokenError('the token expired', 'expired');
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    const reasons: Record<string, [string, string]> = {
      nbf: ['the token is not valid yet (nbf)', 'not yet valid'],
      aud: ['the token is for another audience (aud)', 'wrong audience'],
      iss: ['the token is from another issuer (iss)', 'wrong issuer'],
      sub: ['the token has no subject (sub)', 'missing subject'],
      exp: ['the token has no expiry (exp)', 'missing expiry'],
      iat: ['the token was issued in the future (iat)', 'issued in the future'],
      nonce: ['the ID token answers another sign-in (nonce)', 'wrong nonce'],
    };
    const [message, reason] = reasons[error.claim] ?? [
      `the token's ${error.claim} claim is not valid`,
      `invalid ${error.claim}`,
    ];
    return new InvalidTokenError(message, reason);
  }
  if (error instanceof joseErrors.JWKSNoMatchingKey)
    return new InvalidTokenError(
      "the token's key id (kid) is not one of the issuer's keys",
      'unknown key id',
    );
  if (error instanceof joseErrors.JWKSMultipleMatchingKeys)
    return new InvalidTokenError("the token's key is ambiguous in the issuer's keys", 'ambiguous key');
  if (error instanceof joseErrors.JWSSignatureVerificationFailed)
    return new InvalidTokenError("the token's signature does not verify", 'bad signature');
  if (error instanceof joseErrors.JOSEAlgNotAllowed)
    return new InvalidTokenError("the token's algorithm (alg) is not accepted", 'algorithm not accepted');
  if (
    error instanceof joseErrors.JWSInvalid ||
    error instanceof joseErrors.JWTInvalid ||
    error instanceof joseErrors.JOSENotSupported ||
    error instanceof joseErrors.JWKInvalid
  )
    return new InvalidTokenError('the token is not a valid signed JWT', 'malformed');
  return undefined;
}

export class OidcIssuer {
  private metadataPromise: Promise<IssuerMetadata> | undefined;
  private jwks: JWTVerifyGetKey | undefined;

  constructor(private readonly settings: OidcSettings) {}

  get displayName(): string {
    return this.settings.displayName;
  }

  /** The discovery document (fetched once; a failed fetch is retried on the next call). */
  metadata(): Promise<IssuerMetadata> {
    this.metadataPromise ??= this.discover().catch((error: unknown) => {
      this.metadataPromise = undefined;
      throw error;
    });
    return this.metadataPromise;
  }

  private async discover(): Promise<IssuerMetadata> {
    const url = `${this.settings.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
    const document = (await this.fetchJson(
      url,
      { method: 'GET' },
      'discovery document',
    )) as Partial<IssuerMetadata>;
    if (document.issuer !== this.settings.issuer) {
      throw new TransientError(
        `the issuer's discovery document names issuer '${String(document.issuer)}', not HERALD_API_OIDC_ISSUER ('${this.settings.issuer}')`,
      );
    }
    if (typeof document.jwks_uri !== 'string' && this.settings.jwksUrl === undefined) {
      throw new TransientError(
        "the issuer's discovery document has no jwks_uri (set HERALD_API_OIDC_JWKS_URL)",
      );
    }
    return document as IssuerMetadata;
  }

  private async keys(): Promise<JWTVerifyGetKey> {
    if (this.jwks) return this.jwks;
    const url = this.settings.jwksUrl ?? (await this.metadata()).jwks_uri;
    const { createRemoteJWKSet } = await loadJose();
    // Two first tokens at once may both get here: the first set made is kept.
    this.jwks ??= createRemoteJWKSet(new URL(url), {
      timeoutDuration: FETCH_TIMEOUT_MS,
      cooldownDuration: this.settings.jwksCooldownMs,
      cacheMaxAge: this.settings.jwksMaxAgeMs,
    });
    return this.jwks as JWTVerifyGetKey;
  }

  /** A bearer JWT for this API: the issuer's, for one of HERALD_API_OIDC_AUDIENCE. */
  verifyAccessToken(token: string): Promise<VerifiedToken> {
    return this.verify(token, [...this.settings.audiences]);
  }

  /** The ID token of a dashboard sign-in: for the dashboard's client id, answering this sign-in's nonce. */
  async verifyIdToken(token: string, nonce: string): Promise<VerifiedToken> {
    const client = this.settings.client;
    if (!client) throw new UnauthenticatedError('the dashboard sign-in through the issuer is not configured');
    const payload = await this.verify(token, client.clientId);
    if (payload.nonce !== nonce)
      throw new InvalidTokenError('the ID token answers another sign-in (nonce)', 'wrong nonce');
    return payload;
  }

  private async verify(token: string, audience: string | string[]): Promise<VerifiedToken> {
    const keys = await this.keys();
    const { jwtVerify, errors } = await loadJose();
    try {
      const { payload } = await jwtVerify(token, keys, {
        issuer: this.settings.issuer,
        audience,
        algorithms: [...this.settings.algorithms],
        clockTolerance: this.settings.clockToleranceSeconds,
        requiredClaims: ['sub', 'exp'],
      });
      return payload as VerifiedToken;
    } catch (error) {
      const refused = invalidToken(errors, error);
      if (refused) throw refused;
      // The JWKS could not be fetched (timeout, refused connection, not JSON): the issuer's fault.
      throw new TransientError(`the issuer's keys could not be read: ${(error as Error).message}`, {}, error);
    }
  }

  /** Where the browser goes to sign in (authorization code, PKCE S256). */
  async authorizationUrl(params: {
    state: string;
    nonce: string;
    codeChallenge: string;
    redirectUri: string;
  }): Promise<string> {
    const client = this.requireClient();
    const endpoint = (await this.metadata()).authorization_endpoint;
    if (!endpoint) throw new TransientError("the issuer's discovery document has no authorization_endpoint");
    const url = new URL(endpoint);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', client.clientId);
    url.searchParams.set('redirect_uri', params.redirectUri);
    url.searchParams.set('scope', client.scopes);
    url.searchParams.set('state', params.state);
    url.searchParams.set('nonce', params.nonce);
    url.searchParams.set('code_challenge', params.codeChallenge);
    url.searchParams.set('code_challenge_method', 'S256');
    return url.toString();
  }

  /** Exchanges an authorization code (with its PKCE verifier) at the token endpoint. */
  async exchangeCode(params: {
    code: string;
    codeVerifier: string;
    redirectUri: string;
  }): Promise<TokenResponse> {
    const client = this.requireClient();
    const endpoint = (await this.metadata()).token_endpoint;
    if (!endpoint) throw new TransientError("the issuer's discovery document has no token_endpoint");
    const form = new URLSearchParams({
      grant_type: 'authorization_code',
      code: params.code,
      redirect_uri: params.redirectUri,
      code_verifier: params.codeVerifier,
      client_id: client.clientId,
    });
    const headers: Record<string, string> = {
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    };
    if (client.clientSecret !== undefined) {
      const encode = (value: string) => encodeURIComponent(value);
      headers.authorization = `Basic ${Buffer.from(`${encode(client.clientId)}:${encode(client.clientSecret)}`).toString('base64')}`;
    }
    let response: Response;
    try {
      response = await fetch(endpoint, {
        method: 'POST',
        headers,
        body: form.toString(),
        signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
      });
    } catch (error) {
      throw new TransientError(
        `the issuer's token endpoint did not answer: ${(error as Error).message}`,
        {},
        error,
      );
    }
    const body = (await response.json().catch(() => null)) as Record<string, unknown> | null;
    if (response.status >= 500 || body === null) {
      throw new TransientError(`the issuer's token endpoint answered ${response.status}`);
    }
    if (!response.ok) {
      // invalid_grant and friends: the code was used, expired, or the verifier does not match.
      const error = typeof body.error === 'string' ? body.error : `HTTP ${response.status}`;
      throw new UnauthenticatedError(`the issuer refused the sign-in code (${error})`, { reason: error });
    }
    if (typeof body.id_token !== 'string') {
      throw new UnauthenticatedError(
        'the issuer answered no ID token (is `openid` among HERALD_API_OIDC_SCOPES?)',
      );
    }
    return {
      idToken: body.id_token,
      accessToken: typeof body.access_token === 'string' ? body.access_token : undefined,
      expiresIn: typeof body.expires_in === 'number' ? body.expires_in : undefined,
    };
  }

  private requireClient() {
    const client = this.settings.client;
    if (!client) throw new UnauthenticatedError('the dashboard sign-in through the issuer is not configured');
    return client;
  }

  private async fetchJson(url: string, init: RequestInit, what: string): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(url, {
        ...init,
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
      });
    } catch (error) {
      throw new TransientError(
        `the issuer's ${what} could not be fetched: ${(error as Error).message}`,
        {},
        error,
      );
    }
    if (!response.ok) throw new TransientError(`the issuer's ${what} answered ${response.status}`);
    try {
      return await response.json();
    } catch (error) {
      throw new TransientError(`the issuer's ${what} is not JSON`, {}, error);
    }
  }
}
