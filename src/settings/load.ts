/**
 * Composing the configuration (ADR 0020): the generic sections (core.ts) and the fragments of the
 * registered slices, validated together with zod and returned as one frozen object, `HeraldConfig`
 * plus each slice's settings under its key. An invalid value stops start-up with a ConfigError naming
 * the variable (or the `<name>_FILE` it was read from). A variable declared twice, or two fragments
 * under one key, is a programming error caught when the fragments are composed.
 */
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { readSecretFiles } from './connections.js';
import { CORE_ENV, CORE_SECRET_VARIABLES, CORE_SECTIONS, coreConfig, type HeraldConfig } from './core.js';
import type { AnySettingsFragment, EnvSection, SettingsOfAll } from './fragment.js';

function deepFreeze<T extends object>(value: T): Readonly<T> {
  for (const inner of Object.values(value)) {
    if (inner && typeof inner === 'object' && !Object.isFrozen(inner)) deepFreeze(inner);
  }
  return Object.freeze(value);
}

/** Every section, generic ones first: the order of validation and of the reference. */
export function settingsSections(fragments: readonly AnySettingsFragment[]): readonly EnvSection[] {
  return [...CORE_SECTIONS, ...fragments];
}

/** Refuses a variable declared by two sections and two fragments under one key. */
function composedShape(fragments: readonly AnySettingsFragment[]): Record<string, z.ZodType> {
  const shape: Record<string, z.ZodType> = {};
  const owner = new Map<string, string>();
  for (const section of settingsSections(fragments)) {
    for (const [name, schema] of Object.entries(section.env)) {
      const first = owner.get(name);
      if (first !== undefined) {
        throw new ConfigError(name, `is declared twice (in "${first}" and in "${section.title}")`);
      }
      owner.set(name, section.title);
      shape[name] = schema;
    }
  }
  const keys = new Set<string>();
  for (const { key } of fragments) {
    if (keys.has(key)) throw new ConfigError(key, 'two settings fragments share this key');
    keys.add(key);
  }
  return shape;
}

/** Validates the environment for the generic sections and `fragments`. */
export function loadSettings<F extends AnySettingsFragment>(
  env: Record<string, string | undefined>,
  fragments: readonly F[],
  defaults: { pod?: string } = {},
): HeraldConfig & SettingsOfAll<F> {
  const shape = composedShape(fragments);
  // Empty strings count as unset, as most deployment tools cannot express "unset".
  // Secrets may come from files (X_FILE); a value read from one is reported under that variable.
  const { env: present, fromFile } = readSecretFiles(
    Object.fromEntries(
      Object.entries(env).filter(
        (entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== '',
      ),
    ),
    [...CORE_SECRET_VARIABLES, ...fragments.flatMap((f) => f.secretVariables ?? [])],
  );
  const parsed = z.object(shape).safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = String(issue.path[0] ?? 'environment');
    const reason =
      issue.code === 'invalid_type' && present[field] === undefined ? 'is required' : issue.message;
    if (fromFile.has(field)) throw new ConfigError(`${field}_FILE`, `the file's content: ${reason}`);
    throw new ConfigError(field, reason);
  }
  const e = parsed.data as Record<string, unknown>;
  const core = coreConfig(e as Parameters<typeof coreConfig>[0], defaults);
  const slices: Record<string, unknown> = {};
  const warnings = [...core.warnings];
  const secrets = [...core.secrets];
  for (const fragment of fragments) {
    const own = Object.fromEntries(Object.keys(fragment.env).map((name) => [name, e[name]]));
    slices[fragment.key] = fragment.map(own, core);
    warnings.push(...(fragment.warnings?.(own, core) ?? []));
    secrets.push(...(fragment.secrets?.(own) ?? []));
  }
  return deepFreeze({
    ...core,
    ...slices,
    warnings,
    secrets: [...new Set(secrets)],
  }) as HeraldConfig & SettingsOfAll<F>;
}

/** Every variable the generic sections and `fragments` read. */
export function settingsVariables(fragments: readonly AnySettingsFragment[]): string[] {
  return Object.keys(composedShape(fragments));
}

/** The generic variables only (no slice's). */
export const CORE_VARIABLES = Object.keys(CORE_ENV);
