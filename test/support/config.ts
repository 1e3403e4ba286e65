/** The ConfigError loadConfig stops start-up with for `env`; fails the test if it accepts it or throws anything else. */
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

export function configRefusal(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error('expected a ConfigError: loadConfig accepted it');
}
