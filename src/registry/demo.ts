/**
 * A slice's part of `npm run demo` (src/demo.ts runs the roles and the API, then each registered
 * slice's step in registry order): it creates its work through its own service or the API, watches it
 * reach the expected outcome and prints what happened. A step that returns false fails the demo.
 */
import type { HeraldConfig } from '../settings/core.js';
import type { Runtime } from './role.js';

/** The demo's API: its URL and an admin key of the demo's organization. */
export interface DemoApi {
  readonly url: string;
  readonly key: string;
  readonly organizationId: string;
}

export interface DemoContext<Config extends HeraldConfig = HeraldConfig> {
  readonly runtime: Runtime<Config>;
  readonly config: Config;
  readonly api: DemoApi;
  readonly out: (line?: string) => void;
}

export interface DemoStep<Config extends HeraldConfig = HeraldConfig> {
  /** Settings the step needs for a short demo (the environment given to `npm run demo` wins). */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * Starts what the step's roles talk to before they start (e.g. a simulator of an outside service),
   * returning the settings that point at it (over `env`; the environment given to the demo still wins)
   * and how to stop it. Called once, before the roles; `close` after they stopped.
   */
  setUp?(): Promise<{ readonly env: Readonly<Record<string, string>>; close(): Promise<void> }>;
  /** Resolves true when every piece of the slice's demo reached its expected outcome. */
  run(context: DemoContext<Config>): Promise<boolean>;
}
