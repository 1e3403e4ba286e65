/**
 * Secure connections: TLS and authentication settings for PostgreSQL, RabbitMQ, Kafka and Redis, and
 * secrets read from files, as part of `loadConfig` (`readSecretFiles` before validation: `X_FILE` names
 * the file holding secret X; `connectionSettings` after it). No secret has to be in the environment, and
 * every secret value is known (`secrets`), so the logger can scrub it. PostgreSQL and RabbitMQ TLS settings
 * are written into their URLs' own parameters (the variables win), so every connection built from one URL
 * connects the same way; Redis and Kafka get settings objects. Only paths are kept here. ADR 0015.
 */
import { accessSync, constants, readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { describeSetting } from './fragment.js';

/** A CA bundle to verify the server with (absent: the system's CAs) and an optional client certificate. */
export interface TlsFiles {
  readonly caPath?: string | undefined;
  readonly certPath?: string | undefined;
  readonly keyPath?: string | undefined;
}

export type KafkaSecurityProtocol = 'PLAINTEXT' | 'SSL' | 'SASL_PLAINTEXT' | 'SASL_SSL';
export type KafkaSaslMechanism = 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512';

/** How Herald's Kafka clients connect: Kafka's own `security.protocol` and SASL mechanism names. */
export interface KafkaSecurity {
  readonly protocol: KafkaSecurityProtocol;
  /** Set for SSL and SASL_SSL. */
  readonly tls: TlsFiles | undefined;
  /** Set for SASL_PLAINTEXT and SASL_SSL. */
  readonly sasl:
    | { readonly mechanism: KafkaSaslMechanism; readonly username: string; readonly password: string }
    | undefined;
}

/** REDIS_URL without its user:password, the ACL credentials (the variables win over the URL's) and TLS. */
export interface RedisConnection {
  readonly url: string;
  readonly username: string | undefined;
  readonly password: string | undefined;
  /** Set for rediss:// URLs. */
  readonly tls: TlsFiles | undefined;
}

/** Variables that may hold a secret: each may instead be read from the file `<name>_FILE` names. */
export const SECRET_VARIABLES = [
  'DATABASE_URL',
  'AMQP_URL',
  'REDIS_URL',
  'HERALD_REDIS_PASSWORD',
  'HERALD_KAFKA_SASL_PASSWORD',
] as const;

/**
 * Replaces each `X_FILE` by `X` with the file's content (one trailing newline removed). Both set is an
 * error naming both; so is an unreadable or empty file. `fromFile` lists the variables read from files,
 * so a later validation error can name the `_FILE` variable the value came from.
 */
export function readSecretFiles(
  env: Readonly<Record<string, string>>,
  variables: readonly string[] = SECRET_VARIABLES,
): {
  env: Record<string, string>;
  fromFile: ReadonlySet<string>;
} {
  const out: Record<string, string> = { ...env };
  const fromFile = new Set<string>();
  for (const name of variables) {
    const fileVariable = `${name}_FILE`;
    const path = env[fileVariable];
    if (path === undefined) continue;
    if (env[name] !== undefined) {
      throw new ConfigError(
        fileVariable,
        `${name} is set as well: set only one of ${name} and ${fileVariable}`,
      );
    }
    let content: string;
    try {
      content = readFileSync(path, 'utf8');
    } catch (error) {
      throw new ConfigError(
        fileVariable,
        `cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? error})`,
      );
    }
    const value = content.replace(/\r?\n$/, '');
    if (value === '') throw new ConfigError(fileVariable, `${path} is empty`);
    out[name] = value;
    delete out[fileVariable];
    fromFile.add(name);
  }
  return { env: out, fromFile };
}

function readable(path: string): boolean {
  try {
    accessSync(path, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}

/** A path to a readable file (checked when the configuration is loaded; read when a client is built). */
export const filePath = z.string().superRefine((path, context) => {
  if (!readable(path)) context.addIssue({ code: 'custom', message: `cannot read ${path}` });
});

const PG_SSLMODES = ['disable', 'require', 'verify-ca', 'verify-full'] as const;
export type PostgresSslMode = (typeof PG_SSLMODES)[number];

/** The variables of this module, merged into loadConfig's schema (so errors name them the same way). */
export const connectionEnvShape = {
  HERALD_DB_SSLMODE: describeSetting(
    z.enum(PG_SSLMODES).optional(),
    '`disable`; `require` (encrypted; the server verified only when a CA is given, then as `verify-ca`); `verify-ca` (the chain, not the host name; needs the CA); `verify-full` (chain and host name). `prefer` and `allow` are refused',
    'plain text',
  ),
  HERALD_DB_SSL_CA_PATH: describeSetting(
    filePath.optional(),
    "CA bundle the PostgreSQL server is verified with (unset: the system's CAs)",
  ),
  HERALD_DB_SSL_CERT_PATH: describeSetting(filePath.optional(), 'client certificate for PostgreSQL'),
  HERALD_DB_SSL_KEY_PATH: describeSetting(filePath.optional(), "the client certificate's key"),
  HERALD_AMQP_CA_PATH: describeSetting(
    filePath.optional(),
    "for `amqps://`: the CA (unset: the system's CAs); RabbitMQ's own URI parameters `cacertfile`, `certfile`, `keyfile` work too (the variables win)",
  ),
  HERALD_AMQP_CERT_PATH: describeSetting(filePath.optional(), 'client certificate for RabbitMQ'),
  HERALD_AMQP_KEY_PATH: describeSetting(filePath.optional(), "the client certificate's key"),
  HERALD_KAFKA_SECURITY_PROTOCOL: describeSetting(
    z.enum(['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL']).default('PLAINTEXT'),
    "`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL` (Kafka's `security.protocol`), for every Kafka client",
  ),
  HERALD_KAFKA_SASL_MECHANISM: describeSetting(
    z.enum(['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512']).optional(),
    '`SCRAM-SHA-512`, `SCRAM-SHA-256` or `PLAIN`; required by the `SASL_` protocols',
  ),
  HERALD_KAFKA_SASL_USERNAME: describeSetting(z.string().min(1).optional(), 'the SASL user'),
  HERALD_KAFKA_SASL_PASSWORD: describeSetting(z.string().min(1).optional(), 'the SASL password'),
  HERALD_KAFKA_CA_PATH: describeSetting(
    filePath.optional(),
    "with `SSL`/`SASL_SSL`: the CA (unset: the system's CAs); brokers are verified against their advertised host names",
  ),
  HERALD_KAFKA_CERT_PATH: describeSetting(filePath.optional(), 'client certificate for Kafka'),
  HERALD_KAFKA_KEY_PATH: describeSetting(filePath.optional(), "the client certificate's key"),
  HERALD_REDIS_USERNAME: describeSetting(
    z.string().min(1).optional(),
    "ACL user (wins over the URL's `user@`)",
  ),
  HERALD_REDIS_PASSWORD: describeSetting(
    z.string().min(1).optional(),
    "ACL password (wins over the URL's `:password@`)",
  ),
  HERALD_REDIS_CA_PATH: describeSetting(
    filePath.optional(),
    "for `rediss://`: the CA (unset: the system's CAs)",
  ),
  HERALD_REDIS_CERT_PATH: describeSetting(filePath.optional(), 'client certificate for Redis'),
  HERALD_REDIS_KEY_PATH: describeSetting(filePath.optional(), "the client certificate's key"),
};

type ConnectionEnv = z.infer<z.ZodObject<typeof connectionEnvShape>> & {
  DATABASE_URL: string;
  AMQP_URL?: string | undefined;
  REDIS_URL?: string | undefined;
};

export interface ConnectionSettings {
  /** DATABASE_URL with the effective sslmode, sslrootcert, sslcert and sslkey parameters. */
  readonly databaseUrl: string;
  /** AMQP_URL with the effective cacertfile, certfile and keyfile parameters (on each node's URL of a cluster). */
  readonly amqpUrl: string | undefined;
  readonly redis: RedisConnection | undefined;
  readonly kafkaSecurity: KafkaSecurity;
  /** Every secret value (passwords, also as they appear percent-encoded in URLs): the logger scrubs them. */
  readonly secrets: readonly string[];
  readonly warnings: readonly string[];
}

/** A file setting and where it came from (a variable, or a parameter of a URL variable). */
interface FileSetting {
  path: string;
  variable: string;
}

function fileSetting(
  path: string | undefined,
  variable: string,
  url: URL,
  parameter: string,
  urlVariable: string,
): FileSetting | undefined {
  if (path !== undefined) return { path, variable };
  const fromUrl = url.searchParams.get(parameter);
  if (fromUrl === null) return undefined;
  if (!readable(fromUrl)) throw new ConfigError(urlVariable, `${parameter}: cannot read ${fromUrl}`);
  return { path: fromUrl, variable: `${urlVariable} (${parameter})` };
}

const asSetting = (path: string | undefined, variable: string): FileSetting | undefined =>
  path ? { path, variable } : undefined;

function requirePair(
  cert: FileSetting | undefined,
  key: FileSetting | undefined,
  certVar: string,
  keyVar: string,
) {
  if (cert && !key)
    throw new ConfigError(keyVar, `is required with ${cert.variable} (a client certificate needs its key)`);
  if (key && !cert)
    throw new ConfigError(certVar, `is required with ${key.variable} (a client key needs its certificate)`);
}

function postgresUrl(e: ConnectionEnv, warnings: string[]): string {
  const url = new URL(e.DATABASE_URL);
  const params = url.searchParams;
  // pg's own shorthand `ssl=true|1` (TLS, the server verified against the system's CAs) and `ssl=false|0`.
  let urlMode = params.get('sslmode') ?? undefined;
  const flag = params.get('ssl');
  if (flag !== null && urlMode === undefined) {
    if (!['true', '1', 'false', '0'].includes(flag)) {
      throw new ConfigError(
        'DATABASE_URL',
        `ssl=${flag}: use sslmode (disable, require, verify-ca, verify-full)`,
      );
    }
    urlMode = flag === 'true' || flag === '1' ? 'verify-full' : 'disable';
  }
  if (urlMode !== undefined && !(PG_SSLMODES as readonly string[]).includes(urlMode)) {
    throw new ConfigError(
      'DATABASE_URL',
      `sslmode=${urlMode} is not supported: use disable, require, verify-ca or verify-full ` +
        '(the driver cannot fall back from TLS to plain text as prefer and allow would)',
    );
  }
  const mode = (e.HERALD_DB_SSLMODE ?? urlMode) as PostgresSslMode | undefined;
  const modeVariable = e.HERALD_DB_SSLMODE !== undefined ? 'HERALD_DB_SSLMODE' : 'DATABASE_URL (sslmode)';
  const ca = fileSetting(
    e.HERALD_DB_SSL_CA_PATH,
    'HERALD_DB_SSL_CA_PATH',
    url,
    'sslrootcert',
    'DATABASE_URL',
  );
  const cert = fileSetting(
    e.HERALD_DB_SSL_CERT_PATH,
    'HERALD_DB_SSL_CERT_PATH',
    url,
    'sslcert',
    'DATABASE_URL',
  );
  const key = fileSetting(e.HERALD_DB_SSL_KEY_PATH, 'HERALD_DB_SSL_KEY_PATH', url, 'sslkey', 'DATABASE_URL');
  // A CA or certificate without a mode is a mistake (pg alone would then verify with it), and so is a
  // variable naming one beside an explicit disable; the URL's own files beside disable are moot.
  const file = [ca, cert, key].find((f) => f && (mode === undefined || f.variable.startsWith('HERALD_')));
  if (file && (mode === undefined || mode === 'disable')) {
    throw new ConfigError(
      file.variable,
      `needs HERALD_DB_SSLMODE require, verify-ca or verify-full (sslmode is ${mode ?? 'unset'})`,
    );
  }
  if (mode === 'verify-ca' && !ca) {
    throw new ConfigError(
      'HERALD_DB_SSL_CA_PATH',
      `is required by sslmode verify-ca (${modeVariable}): checking the chain alone against the ` +
        "system's public CAs would accept any certificate they issued to anyone",
    );
  }
  requirePair(cert, key, 'HERALD_DB_SSL_CERT_PATH', 'HERALD_DB_SSL_KEY_PATH');
  if (mode === 'require' && !ca) {
    warnings.push(
      `${modeVariable} require without HERALD_DB_SSL_CA_PATH: the connection is encrypted but the server ` +
        'is not verified (use verify-full with the CA)',
    );
  }
  const touched = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey', 'ssl', 'uselibpqcompat'];
  if (mode === undefined && !touched.some((name) => params.has(name))) return e.DATABASE_URL;
  for (const name of touched) params.delete(name);
  if (mode !== undefined) params.set('sslmode', mode);
  if (mode !== 'disable') {
    if (ca) params.set('sslrootcert', ca.path);
    if (cert) params.set('sslcert', cert.path);
    if (key) params.set('sslkey', key.path);
  }
  return url.toString();
}

function amqpUrl(e: ConnectionEnv): string | undefined {
  const variables = {
    cacertfile: 'HERALD_AMQP_CA_PATH',
    certfile: 'HERALD_AMQP_CERT_PATH',
    keyfile: 'HERALD_AMQP_KEY_PATH',
  } as const;
  const values = {
    cacertfile: e.HERALD_AMQP_CA_PATH,
    certfile: e.HERALD_AMQP_CERT_PATH,
    keyfile: e.HERALD_AMQP_KEY_PATH,
  };
  if (!e.AMQP_URL) {
    const set = Object.entries(values).find(([, value]) => value !== undefined);
    if (set) throw new ConfigError(variables[set[0] as keyof typeof variables], 'needs AMQP_URL (amqps://…)');
    return undefined;
  }
  // A cluster's nodes (several URLs, ADR 0037): each gets the same TLS files.
  const nodes = e.AMQP_URL.split(',').map((node) => node.trim());
  return nodes.map((node) => amqpNodeUrl(node, values, variables)).join(',');
}

function amqpNodeUrl(
  node: string,
  values: Record<'cacertfile' | 'certfile' | 'keyfile', string | undefined>,
  variables: Record<'cacertfile' | 'certfile' | 'keyfile', string>,
): string {
  const url = new URL(node);
  const settings = Object.fromEntries(
    (Object.keys(variables) as (keyof typeof variables)[]).map((parameter) => [
      parameter,
      fileSetting(values[parameter], variables[parameter], url, parameter, 'AMQP_URL'),
    ]),
  ) as Record<keyof typeof variables, FileSetting | undefined>;
  const file = settings.cacertfile ?? settings.certfile ?? settings.keyfile;
  if (file && url.protocol !== 'amqps:') throw new ConfigError(file.variable, 'needs an amqps:// AMQP_URL');
  requirePair(settings.certfile, settings.keyfile, 'HERALD_AMQP_CERT_PATH', 'HERALD_AMQP_KEY_PATH');
  if (Object.values(values).every((value) => value === undefined)) return node;
  for (const [parameter, setting] of Object.entries(settings)) {
    if (setting) url.searchParams.set(parameter, setting.path);
  }
  return url.toString();
}

function kafkaSecurity(e: ConnectionEnv, warnings: string[]): KafkaSecurity {
  const protocol = e.HERALD_KAFKA_SECURITY_PROTOCOL;
  const withTls = protocol === 'SSL' || protocol === 'SASL_SSL';
  const withSasl = protocol === 'SASL_PLAINTEXT' || protocol === 'SASL_SSL';
  const files = {
    HERALD_KAFKA_CA_PATH: e.HERALD_KAFKA_CA_PATH,
    HERALD_KAFKA_CERT_PATH: e.HERALD_KAFKA_CERT_PATH,
    HERALD_KAFKA_KEY_PATH: e.HERALD_KAFKA_KEY_PATH,
  };
  const sasl = {
    HERALD_KAFKA_SASL_MECHANISM: e.HERALD_KAFKA_SASL_MECHANISM,
    HERALD_KAFKA_SASL_USERNAME: e.HERALD_KAFKA_SASL_USERNAME,
    HERALD_KAFKA_SASL_PASSWORD: e.HERALD_KAFKA_SASL_PASSWORD,
  };
  const setFile = Object.entries(files).find(([, value]) => value !== undefined);
  if (setFile && !withTls) {
    throw new ConfigError(
      setFile[0],
      `needs HERALD_KAFKA_SECURITY_PROTOCOL SSL or SASL_SSL (it is ${protocol})`,
    );
  }
  requirePair(
    asSetting(e.HERALD_KAFKA_CERT_PATH, 'HERALD_KAFKA_CERT_PATH'),
    asSetting(e.HERALD_KAFKA_KEY_PATH, 'HERALD_KAFKA_KEY_PATH'),
    'HERALD_KAFKA_CERT_PATH',
    'HERALD_KAFKA_KEY_PATH',
  );
  if (!withSasl) {
    const setSasl = Object.entries(sasl).find(([, value]) => value !== undefined);
    if (setSasl) {
      throw new ConfigError(
        setSasl[0],
        `needs HERALD_KAFKA_SECURITY_PROTOCOL SASL_SSL or SASL_PLAINTEXT (it is ${protocol})`,
      );
    }
  } else {
    const missing = Object.entries(sasl).find(([, value]) => value === undefined);
    if (missing)
      throw new ConfigError(missing[0], `is required by HERALD_KAFKA_SECURITY_PROTOCOL ${protocol}`);
    if (protocol === 'SASL_PLAINTEXT' && e.HERALD_KAFKA_SASL_MECHANISM === 'PLAIN') {
      warnings.push(
        'HERALD_KAFKA_SECURITY_PROTOCOL SASL_PLAINTEXT with HERALD_KAFKA_SASL_MECHANISM PLAIN sends the ' +
          'Kafka password unencrypted (use SASL_SSL)',
      );
    }
  }
  return {
    protocol,
    tls: withTls
      ? {
          caPath: e.HERALD_KAFKA_CA_PATH,
          certPath: e.HERALD_KAFKA_CERT_PATH,
          keyPath: e.HERALD_KAFKA_KEY_PATH,
        }
      : undefined,
    sasl: withSasl
      ? {
          mechanism: e.HERALD_KAFKA_SASL_MECHANISM!,
          username: e.HERALD_KAFKA_SASL_USERNAME!,
          password: e.HERALD_KAFKA_SASL_PASSWORD!,
        }
      : undefined,
  };
}

function redisConnection(e: ConnectionEnv): RedisConnection | undefined {
  const files = {
    HERALD_REDIS_CA_PATH: e.HERALD_REDIS_CA_PATH,
    HERALD_REDIS_CERT_PATH: e.HERALD_REDIS_CERT_PATH,
    HERALD_REDIS_KEY_PATH: e.HERALD_REDIS_KEY_PATH,
  };
  const setFile = Object.entries(files).find(([, value]) => value !== undefined);
  if (!e.REDIS_URL) {
    const set =
      setFile?.[0] ??
      (e.HERALD_REDIS_USERNAME !== undefined ? 'HERALD_REDIS_USERNAME' : undefined) ??
      (e.HERALD_REDIS_PASSWORD !== undefined ? 'HERALD_REDIS_PASSWORD' : undefined);
    if (set) throw new ConfigError(set, 'needs REDIS_URL');
    return undefined;
  }
  const url = new URL(e.REDIS_URL);
  if (setFile && url.protocol !== 'rediss:') throw new ConfigError(setFile[0], 'needs a rediss:// REDIS_URL');
  requirePair(
    asSetting(e.HERALD_REDIS_CERT_PATH, 'HERALD_REDIS_CERT_PATH'),
    asSetting(e.HERALD_REDIS_KEY_PATH, 'HERALD_REDIS_KEY_PATH'),
    'HERALD_REDIS_CERT_PATH',
    'HERALD_REDIS_KEY_PATH',
  );
  const username = e.HERALD_REDIS_USERNAME ?? (url.username ? decodeURIComponent(url.username) : undefined);
  const password = e.HERALD_REDIS_PASSWORD ?? (url.password ? decodeURIComponent(url.password) : undefined);
  url.username = '';
  url.password = '';
  return {
    url: url.toString(),
    username,
    password,
    tls:
      url.protocol === 'rediss:'
        ? {
            caPath: e.HERALD_REDIS_CA_PATH,
            certPath: e.HERALD_REDIS_CERT_PATH,
            keyPath: e.HERALD_REDIS_KEY_PATH,
          }
        : undefined,
  };
}

/** A URL's password as written (percent-encoded) and decoded. */
export function urlPasswords(value: string | undefined): string[] {
  if (!value) return [];
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return [];
  }
  if (!url.password) return [];
  const decode = (value: string) => {
    try {
      return decodeURIComponent(value);
    } catch {
      return value; // a malformed escape: the raw form is what could be printed
    }
  };
  const decoded = decode(url.password);
  // A password equal to its user name (the local test services' herald:herald) is no secret: the
  // name is printed freely, and scrubbing it would garble every line that names the user.
  if (decoded === decode(url.username)) return [];
  return [url.password, decoded];
}

/** The effective connection settings; throws ConfigError naming the variable of any contradiction. */
export function connectionSettings(e: ConnectionEnv): ConnectionSettings {
  const warnings: string[] = [];
  const databaseUrl = postgresUrl(e, warnings);
  const kafka = kafkaSecurity(e, warnings);
  const secrets = [
    ...urlPasswords(e.DATABASE_URL),
    ...(e.AMQP_URL ?? '').split(',').flatMap((node) => urlPasswords(node.trim())),
    ...urlPasswords(e.REDIS_URL),
    e.HERALD_REDIS_PASSWORD,
    e.HERALD_KAFKA_SASL_PASSWORD,
  ].filter((value): value is string => value !== undefined && value !== '');
  return {
    databaseUrl,
    amqpUrl: amqpUrl(e),
    redis: redisConnection(e),
    kafkaSecurity: kafka,
    secrets: [...new Set(secrets)],
    warnings,
  };
}
