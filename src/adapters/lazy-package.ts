/**
 * A CommonJS package loaded when an adapter first needs it, not when the process starts: the CLI's
 * single entry imports every slice and adapter, so a statically imported driver is paid by every
 * `herald` call and every role's start, used or not (ioredis, nodemailer and undici were ~0.3 s of CPU
 * of each start). Types still come from a type-only import; the package is required synchronously.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export function lazyPackage<T>(name: string): () => T {
  let loaded: T | undefined;
  return () => {
    loaded ??= require(name) as T;
    return loaded;
  };
}
