/**
 * The dashboard's only way to the server: an openapi-fetch client typed by schema.d.ts (generated from
 * the server's /openapi.json by scripts/generate-ui-client.mjs, so a changed route breaks `tsc`, not a
 * page), the session (cookie set by POST /v1/session; its CSRF token sent as `x-csrf-token` on every
 * command), and live updates from GET /v1/stream (Server-Sent Events) with a 10 s polling fallback.
 * One EventSource per tab, however many components listen: an hour-long page holds one connection and
 * a fixed set of listeners.
 */
import { QueryClient, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import createClient, { type Middleware } from 'openapi-fetch';
import { useEffect, useRef, useState } from 'react';
import type { components, paths } from './schema';

export type Schemas = components['schemas'];

/** A problem document (RFC 9457) as the API sends it. */
export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  errors?: { field?: string; message?: string }[];
  [extra: string]: unknown;
}

/** A refused or failed API call: the status and the server's problem document. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem,
  ) {
    super(problem.detail ?? problem.title ?? `HTTP ${status}`);
    this.name = 'ApiError';
  }
}

let csrfToken: string | null = null;

/** The session's CSRF header for a command (the client adds it on its own; for hand-made requests). */
export function csrfHeaders(): Record<string, string> {
  return csrfToken ? { 'x-csrf-token': csrfToken } : {};
}

export const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      retry: (count, error) => !(error instanceof ApiError && error.status < 500) && count < 2,
      refetchOnWindowFocus: false,
      staleTime: 2_000,
    },
  },
});

const commands: Middleware = {
  onRequest({ request }) {
    if (request.method !== 'GET' && request.method !== 'HEAD' && csrfToken) {
      request.headers.set('x-csrf-token', csrfToken);
    }
    return request;
  },
  onResponse({ response, request }) {
    // The session ended (idle timeout, key revoked): back to sign-in, whatever page asked.
    if (response.status === 401 && !new URL(request.url).pathname.startsWith('/v1/session')) {
      queryClient.setQueryData(SESSION_KEY, null);
    }
    return response;
  },
};

/** The typed client: `api.GET('/v1/campaigns', { params: { query } })` etc. Same-origin cookie session. */
export const api = createClient<paths>({ baseUrl: window.location.origin, credentials: 'same-origin' });
api.use(commands);

/**
 * The data of an openapi-fetch call, or an ApiError with the problem document:
 * `useQuery({ queryKey, queryFn: () => unwrap(api.GET(...)) })`.
 */
export async function unwrap<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<NonNullable<T>> {
  const { data, error, response } = await call;
  if (!response.ok || error !== undefined) {
    const problem: Problem =
      error && typeof error === 'object' ? (error as Problem) : { title: response.statusText };
    throw new ApiError(response.status, problem);
  }
  return (data ?? null) as NonNullable<T>;
}

// --- session ------------------------------------------------------------------------------------------

export type Session = Schemas['Session'];
export type Role = Session['role'];

export const SESSION_KEY = ['session'] as const;

/**
 * The cookie's session, or null when signed out: asked through GET /v1/session/status, which answers 200
 * either way, so a signed-out visit makes no failing request (no 401 in the browser's console).
 */
async function currentSession(): Promise<Session | null> {
  const status = await unwrap(api.GET('/v1/session/status'));
  return status.signedIn ? status.session : null;
}

export type SignInOptions = Schemas['SessionStatus']['oidc'];

/**
 * How the sign-in page may sign in besides a key: the OpenID Connect issuer's button, when configured
 * (`oidc` of GET /v1/session/status; ADR 0035). The exchange happens in the API, so no token reaches
 * this page: the browser only follows `signInUrl` and comes back with the session cookie.
 */
export function useSignInOptions(): SignInOptions | undefined {
  const query = useQuery({
    queryKey: ['session-options'],
    queryFn: async () => (await unwrap(api.GET('/v1/session/status'))).oidc,
    staleTime: Number.POSITIVE_INFINITY,
    retry: false,
  });
  return query.data;
}

export interface SessionState {
  /** undefined while loading, null when signed out. */
  session: Session | null | undefined;
  loading: boolean;
  /** operator and admin may issue commands; a viewer sees no command buttons (the API refuses anyway). */
  canCommand: boolean;
  isAdmin: boolean;
  signIn(apiKey: string): Promise<Session>;
  signOut(): Promise<void>;
  signInError: unknown;
  signingIn: boolean;
}

/** The current session (GET /v1/session once, then cached), sign-in and sign-out. */
export function useSession(): SessionState {
  const client = useQueryClient();
  const query = useQuery({
    queryKey: SESSION_KEY,
    queryFn: currentSession,
    staleTime: Number.POSITIVE_INFINITY,
    retry: false,
  });
  const session = query.data;
  csrfToken = session?.csrfToken ?? null;
  const signIn = useMutation({
    mutationFn: (apiKey: string) => unwrap(api.POST('/v1/session', { body: { apiKey } })),
    onSuccess: (created) => {
      csrfToken = created.csrfToken;
      client.setQueryData(SESSION_KEY, created);
    },
  });
  const signOut = useMutation({
    mutationFn: async () => {
      const { response } = await api.DELETE('/v1/session');
      if (!response.ok && response.status !== 401) throw new ApiError(response.status, {});
    },
    onSettled: () => {
      csrfToken = null;
      client.setQueryData(SESSION_KEY, null);
      client.removeQueries({ predicate: (q) => q.queryKey[0] !== SESSION_KEY[0] });
    },
  });
  const role = session?.role;
  return {
    session,
    loading: query.isPending,
    canCommand: role === 'operator' || role === 'admin',
    isAdmin: role === 'admin',
    signIn: (apiKey) => signIn.mutateAsync(apiKey),
    signOut: async () => {
      await signOut.mutateAsync();
    },
    signInError: signIn.error,
    signingIn: signIn.isPending,
  };
}

// --- actors -------------------------------------------------------------------------------------------

export type Actor = Schemas['Actor'];

/**
 * Who `actor` is (`api-key:<id>` → the key's name; anything else as it is), from GET /v1/actors, cached
 * for the tab. The actors a page shows at once are asked together (one request per render batch).
 */
export function useActor(actor: string | null | undefined): Actor | undefined {
  const query = useQuery({
    queryKey: ['actors', actor],
    enabled: Boolean(actor),
    staleTime: 60_000,
    queryFn: () => actorBatch.ask(actor!),
  });
  return query.data;
}

/** Collects the actors asked within one tick into one request. */
const actorBatch = (() => {
  let waiting: Map<string, { resolve(a: Actor): void; reject(e: unknown): void }[]> | null = null;
  const flush = async (batch: NonNullable<typeof waiting>) => {
    const actors = [...batch.keys()];
    try {
      for (let i = 0; i < actors.length; i += 50) {
        const chunk = actors.slice(i, i + 50);
        const result = await unwrap(
          api.GET('/v1/actors', { params: { query: { actors: chunk.join(',') } } }),
        );
        for (const a of result.actors) for (const w of batch.get(a.actor) ?? []) w.resolve(a);
      }
      for (const [actor, list] of batch)
        for (const w of list) w.resolve({ actor, kind: 'other', name: null, role: null, revoked: false });
    } catch (error) {
      for (const list of batch.values()) for (const w of list) w.reject(error);
    }
  };
  return {
    ask(actor: string): Promise<Actor> {
      return new Promise((resolve, reject) => {
        if (!waiting) {
          const batch = new Map<string, { resolve(a: Actor): void; reject(e: unknown): void }[]>();
          waiting = batch;
          setTimeout(() => {
            waiting = null;
            void flush(batch);
          }, 0);
        }
        const list = waiting.get(actor) ?? [];
        list.push({ resolve, reject });
        waiting.set(actor, list);
      });
    },
  };
})();

// --- live updates ---------------------------------------------------------------------------------------

export type LiveTopic = 'campaigns' | 'actions' | 'cron' | 'outbox' | 'overview';
export type LiveMode = 'connecting' | 'live' | 'polling';

const POLL_MS = 10_000;
const RECONNECT_MS = 30_000;

type Listener = () => void;

/** The tab's one stream: topic listeners, the SSE connection while anyone listens, polling when it fails. */
class LiveHub {
  private readonly listeners = new Map<string, Set<Listener>>();
  private readonly modeListeners = new Set<(mode: LiveMode) => void>();
  private source: EventSource | null = null;
  private poll: ReturnType<typeof setInterval> | null = null;
  private reconnect: ReturnType<typeof setTimeout> | null = null;
  mode: LiveMode = 'connecting';

  subscribe(topics: readonly string[], listener: Listener): () => void {
    for (const topic of topics) {
      let set = this.listeners.get(topic);
      if (!set) {
        set = new Set();
        this.listeners.set(topic, set);
        this.source?.addEventListener(topic, this.onTopic);
      }
      set.add(listener);
    }
    this.ensure();
    return () => {
      for (const topic of topics) {
        const set = this.listeners.get(topic);
        set?.delete(listener);
        if (set && set.size === 0) {
          this.listeners.delete(topic);
          this.source?.removeEventListener(topic, this.onTopic);
        }
      }
      if (this.listeners.size === 0) this.stop();
    };
  }

  onMode(listener: (mode: LiveMode) => void): () => void {
    this.modeListeners.add(listener);
    return () => this.modeListeners.delete(listener);
  }

  private readonly onTopic = (event: Event) => {
    for (const listener of this.listeners.get(event.type) ?? []) listener();
  };

  private setMode(mode: LiveMode): void {
    if (this.mode === mode) return;
    this.mode = mode;
    for (const listener of this.modeListeners) listener(mode);
  }

  private ensure(): void {
    if (this.source || this.reconnect || typeof EventSource === 'undefined') {
      if (typeof EventSource === 'undefined') this.startPolling();
      return;
    }
    const source = new EventSource('/v1/stream', { withCredentials: true });
    this.source = source;
    for (const topic of this.listeners.keys()) source.addEventListener(topic, this.onTopic);
    source.onopen = () => {
      const reopened = this.mode === 'polling';
      this.stopPolling();
      this.setMode('live');
      // Whatever changed while the stream was down: everyone refetches once (not on the first open:
      // the pages have just fetched).
      if (reopened) this.everyone();
    };
    source.onerror = () => {
      // The browser retries an open stream on its own; a refused one (CLOSED) is retried here, later.
      this.startPolling();
      if (source.readyState === EventSource.CLOSED) {
        source.close();
        this.source = null;
        this.reconnect = setTimeout(() => {
          this.reconnect = null;
          if (this.listeners.size > 0) this.ensure();
        }, RECONNECT_MS);
      }
    };
  }

  private everyone(): void {
    const all = new Set<Listener>();
    for (const set of this.listeners.values()) for (const listener of set) all.add(listener);
    for (const listener of all) listener();
  }

  private startPolling(): void {
    this.setMode('polling');
    if (!this.poll) this.poll = setInterval(() => this.everyone(), POLL_MS);
  }

  private stopPolling(): void {
    if (this.poll) clearInterval(this.poll);
    this.poll = null;
  }

  stop(): void {
    this.stopPolling();
    if (this.reconnect) clearTimeout(this.reconnect);
    this.reconnect = null;
    this.source?.close();
    this.source = null;
    this.setMode('connecting');
  }
}

export const liveHub = new LiveHub();

/** A live-stream topic, as the server's document lists them (`GET /v1/stream/topics`). */
export type StreamTopic = Schemas['StreamTopic'];

/**
 * Calls `onChange` whenever the server reports a change on one of `topics` (coalesced by the server to
 * at most one event per topic per second), or every 10 s while the stream is down. The topics are the
 * server's (a typo, or a topic the server dropped, fails the type check).
 * Typical use: `useLive(['campaigns'], () => void query.refetch())`.
 */
export function useLive(topics: StreamTopic[], onChange: () => void): void {
  const latest = useRef(onChange);
  latest.current = onChange;
  const key = [...topics].sort().join(',');
  useEffect(() => {
    const list = key ? key.split(',') : [];
    if (list.length === 0) return;
    return liveHub.subscribe(list, () => latest.current());
  }, [key]);
}

/** The stream's state, for the header's live indicator. */
export function useLiveMode(): LiveMode {
  const [mode, setMode] = useState<LiveMode>(liveHub.mode);
  useEffect(() => liveHub.onMode(setMode), []);
  return mode;
}
