/**
 * Reads the CA bundle and client certificate files of a connection (src/connections.ts, ADR 0015) into
 * Node `tls` options for any driver. Files are read when a client is built (a pool, a Kafka or Redis
 * client, every AMQP connection), not at configuration time (which only checks they are readable); a
 * file that vanished since start-up is a ConfigError naming the file, not a driver error.
 */
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { ConfigError } from '../errors.js';
import type { TlsFiles } from '../settings/connections.js';

function read(path: string, what: string, service: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new ConfigError(
      `${service} TLS`,
      `cannot read the ${what} ${path} (${(error as NodeJS.ErrnoException).code ?? error})`,
    );
  }
}

/** `ca`, `cert` and `key` for tls.connect (absent: the system's CAs, no client certificate). */
export function readTlsFiles(
  files: TlsFiles,
  service: string,
): Pick<ConnectionOptions, 'ca' | 'cert' | 'key'> {
  return {
    ...(files.caPath ? { ca: read(files.caPath, 'CA file', service) } : {}),
    ...(files.certPath ? { cert: read(files.certPath, 'client certificate', service) } : {}),
    ...(files.keyPath ? { key: read(files.keyPath, 'client key', service) } : {}),
  };
}
