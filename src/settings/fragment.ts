/**
 * Settings fragments (ADR 0020): a group of environment variables, each written once with its
 * validator, default and meaning (`describeSetting`), and how they become typed settings. Herald's
 * generic machinery has its sections (src/settings/core.ts); each slice's registration brings its own
 * fragment (`defineSettings`), which `loadSettings` composes with them, so the configuration type,
 * the validation and the reference in docs/reference/configuration.md all come from one place. Nothing here
 * reads `process.env`.
 */
import type { z } from 'zod';
import type { HeraldConfig } from './core.js';

export type EnvShape = Readonly<Record<string, z.ZodType>>;
export type EnvOf<Shape extends EnvShape> = { [K in keyof Shape]: z.output<Shape[K]> };

/** What the configuration reference prints for one group of variables. */
export interface EnvSection {
  /** The reference's heading for this group. */
  readonly title: string;
  /** Variable → validator (described with `describeSetting`). Each variable belongs to one section. */
  readonly env: EnvShape;
  /** Variables that may hold a secret: each may instead be read from the file `<name>_FILE` names. */
  readonly secretVariables?: readonly string[];
}

/** A slice's settings: its section, and the typed settings object it adds to the config under `key`. */
export interface SettingsFragment<
  Key extends string = string,
  Shape extends EnvShape = EnvShape,
  Out = unknown,
> extends EnvSection {
  readonly key: Key;
  readonly env: Shape;
  /**
   * The settings from the validated variables and the generic configuration (for cross-checks such as
   * a concurrency below HERALD_DB_POOL_SIZE); throws ConfigError naming the variable it refuses.
   */
  readonly map: (env: EnvOf<Shape>, base: HeraldConfig) => Out;
  /** Combinations that work but weaken a guarantee (logged by every role at start-up). */
  readonly warnings?: (env: EnvOf<Shape>, base: HeraldConfig) => readonly string[];
  /** Secret values of these settings (e.g. a URL's password): the logger scrubs them. */
  readonly secrets?: (env: EnvOf<Shape>) => readonly string[];
}

// biome-ignore lint/suspicious/noExplicitAny: a fragment of any shape and output, as lists hold them.
export type AnySettingsFragment = SettingsFragment<string, any, any>;

export function defineSettings<Key extends string, Shape extends EnvShape, Out>(
  fragment: SettingsFragment<Key, Shape, Out>,
): SettingsFragment<Key, Shape, Out> {
  return fragment;
}

/** The part of the configuration a fragment adds: `{ [key]: settings }`. */
export type SettingsOf<F> =
  F extends SettingsFragment<infer Key, infer _Shape, infer Out> ? { readonly [K in Key]: Out } : never;

type UnionToIntersection<U> = (U extends unknown ? (union: U) => void : never) extends (
  intersection: infer I,
) => void
  ? I
  : never;

/** The settings several fragments add together (`{}` for none). */
export type SettingsOfAll<F> = [F] extends [never] ? unknown : UnionToIntersection<SettingsOf<F>>;

/** The metadata key the reference reads a computed default's wording from. */
const DEFAULT_SHOWN = 'x-default';

/**
 * A variable's validator with its meaning for the reference (and, where the default is computed or
 * elsewhere, how to show it: `min(8, pool − 1)`).
 */
export function describeSetting<S extends z.ZodType>(schema: S, meaning: string, defaultShown?: string): S {
  return schema.meta({ description: meaning, ...(defaultShown ? { [DEFAULT_SHOWN]: defaultShown } : {}) });
}

export const defaultShownKey = DEFAULT_SHOWN;
