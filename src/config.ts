/**
 * Herald's configuration: the generic settings (src/settings/core.ts) composed with the fragments of
 * the slices in Herald's registry (src/aggregates/registry.ts), validated by zod into one frozen
 * object. An invalid value stops start-up with a ConfigError naming the variable. The one place Herald
 * reads its configuration; nothing else reads `process.env`.
 */
import { heraldRegistry } from './aggregates/registry.js';
import type { RegistrySettings } from './registry/registry.js';
import type { Runtime } from './registry/role.js';
import type { HeraldConfig } from './settings/core.js';
import { settingsSections, settingsVariables } from './settings/load.js';

/** The configuration of Herald's roles: the generic settings and every registered slice's. */
export type HeraldSettings = HeraldConfig & RegistrySettings<(typeof heraldRegistry.modules)[number]>;

/** A runtime of Herald's roles (its config carries every registered slice's settings). */
export type HeraldRuntime = Runtime<HeraldSettings>;

/** Validates the environment. Throws ConfigError naming the first invalid variable. */
export function loadConfig(
  env: Record<string, string | undefined>,
  defaults: { pod?: string } = {},
): HeraldSettings {
  return heraldRegistry.loadConfig(env, defaults);
}

/** Every variable Herald reads (`herald config`, the reference). */
export const CONFIG_VARIABLES = settingsVariables(heraldRegistry.settings);

/** The sections of the configuration reference, generic ones first (docs/reference/configuration.md). */
export const CONFIG_SECTIONS = settingsSections(heraldRegistry.settings);
