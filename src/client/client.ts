/**
 * `createHeraldClient`: Herald's HTTP API typed end to end (paths, parameters, bodies, answers) from the
 * server's own OpenAPI document (./generated/, ADR 0034), on openapi-fetch. Each call answers its data or
 * throws a HeraldProblemError; every operation the document says accepts an `Idempotency-Key` gets a
 * fresh UUID v4 unless the call names its own, and keeps it across the client's retries, so a command
 * retried after a timeout or a 429/503 is applied once (ADR 0012, 0029). Lists are followed by cursor
 * (`paginate`, `pages`) and the live stream is an async iterator (`stream`).
 */
import createClient, { type Client, type FetchResponse, type MaybeOptionalInit } from 'openapi-fetch';
import { problemError } from './errors.js';
import { IDEMPOTENT_OPERATIONS, type PAGED_PATHS } from './generated/operations.js';
import type { components, paths } from './generated/schema.js';
import { type Credential, DEFAULT_RETRIES, type RetryOptions, retryAfterMs, retryingFetch } from './retry.js';
import { liveStream, type StreamEvent, type StreamOptions } from './stream.js';

/** The API's schemas by name: `Schemas['Campaign']`, `Schemas['ScheduledAction']`, … */
export type Schemas = components['schemas'];
export type { paths };

export interface HeraldClientOptions {
  /** Where `herald api` listens: `https://herald.example.com` (paths start with /v1/…). */
  baseUrl: string;
  /**
   * The bearer credential: an API key (`hk_…`) or a token, or a function giving one (asked before each
   * attempt, so it may refresh a short-lived token).
   */
  credential: Credential;
  /** The fetch to send with (default: the global fetch). */
  fetch?: (request: Request) => Promise<Response>;
  /** Retries of 429, 503 and network errors (see RetryOptions); `false`: never retry. */
  retries?: RetryOptions | false;
  /** Makes the Idempotency-Key of a command that names none (default: a random UUID v4). */
  idempotencyKey?: () => string;
  /** Headers sent with every request (a user agent, a tracing header). */
  headers?: Record<string, string>;
}

type HttpMethod = 'get' | 'put' | 'post' | 'delete' | 'patch';
/** The paths that serve `M`. */
export type PathsWith<M extends HttpMethod> = {
  [P in keyof paths]: paths[P] extends { [K in M]: object } ? P : never;
}[keyof paths];
type RequiredKeysOf<T> = { [K in keyof T]-?: object extends Pick<T, K> ? never : K }[keyof T];
/** The call's options: required when the operation has a required parameter or body. */
type InitParam<Init> =
  RequiredKeysOf<Init> extends never
    ? [(Init & { [key: string]: unknown })?]
    : [Init & { [key: string]: unknown }];
/** What an operation answers on success. */
export type ResponseData<P extends keyof paths, M extends HttpMethod, Init = object> = Exclude<
  FetchResponse<paths[P][M] & Record<string | number, unknown>, Init, `${string}/${string}`>['data'],
  undefined
>;

/** `client.POST('/v1/campaigns', { body })`: the answer's data, or a thrown HeraldProblemError. */
export type CallMethod<M extends HttpMethod> = <
  P extends PathsWith<M>,
  Init extends MaybeOptionalInit<paths[P], M>,
>(
  path: P,
  ...init: InitParam<Init>
) => Promise<ResponseData<P, M, Init>>;

/** The list operations that page by cursor. */
export type PagedPath = Extract<(typeof PAGED_PATHS)[number], PathsWith<'get'>>;
export type Page<P extends PagedPath> = ResponseData<P, 'get'>;
export type PageItem<P extends PagedPath> = Page<P> extends { items: (infer T)[] } ? T : never;

export interface HeraldClient {
  GET: CallMethod<'get'>;
  POST: CallMethod<'post'>;
  PUT: CallMethod<'put'>;
  PATCH: CallMethod<'patch'>;
  DELETE: CallMethod<'delete'>;
  /**
   * Every item of a cursor-paged list, page after page as the loop asks for them:
   * `for await (const campaign of client.paginate('/v1/campaigns', { params: { query: { status } } }))`.
   */
  paginate<P extends PagedPath, Init extends MaybeOptionalInit<paths[P], 'get'>>(
    path: P,
    ...init: InitParam<Init>
  ): AsyncGenerator<PageItem<P>, void, undefined>;
  /** The pages themselves (`{ items, nextCursor }`), for a caller that works a page at a time. */
  pages<P extends PagedPath, Init extends MaybeOptionalInit<paths[P], 'get'>>(
    path: P,
    ...init: InitParam<Init>
  ): AsyncGenerator<Page<P>, void, undefined>;
  /** The live stream (`GET /v1/stream`): `for await (const event of client.stream({ topics: ['campaigns'] }))`. */
  stream(options?: StreamOptions): AsyncGenerator<StreamEvent, void, undefined>;
  /**
   * The underlying openapi-fetch client (same credential, keys and retries), answering
   * `{ data, error, response }` instead of throwing: for a caller that wants the response's headers.
   */
  raw: Client<paths>;
}

type LooseCall = (
  method: string,
  path: string,
  init?: object,
) => Promise<{ data?: unknown; error?: unknown; response: Response }>;

export function createHeraldClient(options: HeraldClientOptions): HeraldClient {
  const retries = {
    ...DEFAULT_RETRIES,
    // A field given as undefined keeps its default.
    ...(options.retries === false
      ? { maxAttempts: 1 }
      : Object.fromEntries(Object.entries(options.retries ?? {}).filter(([, v]) => v !== undefined))),
  } as typeof DEFAULT_RETRIES;
  const idempotent = new Set(IDEMPOTENT_OPERATIONS);
  const newKey = options.idempotencyKey ?? (() => globalThis.crypto.randomUUID());
  const raw = createClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    fetch: retryingFetch({
      credential: options.credential,
      fetch: options.fetch ?? ((request) => globalThis.fetch(request)),
      retries,
    }),
    ...(options.headers ? { headers: options.headers } : {}),
  });
  raw.use({
    onRequest({ request, schemaPath }) {
      if (idempotent.has(`${request.method} ${schemaPath}`) && !request.headers.has('idempotency-key')) {
        request.headers.set('idempotency-key', newKey());
      }
      return request;
    },
  });
  const loose = raw.request as unknown as LooseCall;

  const call = async (method: HttpMethod, path: string, init?: object): Promise<unknown> => {
    const { data, error, response } = await loose(method, path, init);
    if (!response.ok) {
      throw problemError(response, error, retryAfterMs(response.headers.get('retry-after'), retries.now()));
    }
    return data;
  };
  const method =
    <M extends HttpMethod>(m: M): CallMethod<M> =>
    (path, ...init) =>
      call(m, path as string, init[0]) as never;

  async function* pages(path: string, init?: { params?: { query?: Record<string, unknown> } }) {
    let cursor: string | null | undefined;
    do {
      const query = { ...init?.params?.query, ...(cursor ? { cursor } : {}) };
      const page = (await call('get', path, { ...init, params: { ...init?.params, query } })) as {
        items: unknown[];
        nextCursor: string | null;
      };
      yield page;
      cursor = page.nextCursor;
    } while (cursor);
  }

  return {
    GET: method('get'),
    POST: method('post'),
    PUT: method('put'),
    PATCH: method('patch'),
    DELETE: method('delete'),
    pages: ((path: string, init?: object) => pages(path, init)) as HeraldClient['pages'],
    paginate: async function* (path: string, init?: object) {
      for await (const page of pages(path, init)) yield* page.items;
    } as HeraldClient['paginate'],
    stream: (streamOptions) =>
      liveStream(
        {
          open: async (topics, lastEventId, signal) => {
            const { response, error } = await raw.GET('/v1/stream', {
              params: { query: { topics: topics.join(',') } },
              parseAs: 'stream',
              signal,
              headers: {
                accept: 'text/event-stream',
                ...(lastEventId !== undefined ? { 'last-event-id': lastEventId } : {}),
              },
            });
            if (!response.ok || !response.body) {
              throw problemError(
                response,
                error,
                retryAfterMs(response.headers.get('retry-after'), retries.now()),
              );
            }
            return response;
          },
          sleep: retries.sleep,
          now: retries.now,
        },
        streamOptions,
      ),
    raw,
  };
}
