// Generates the dashboard's typed API client (ui/src/api/openapi.json + ui/src/api/schema.d.ts) from the
// server's own OpenAPI document: the Fastify app is built in-process (routes registered, never listening)
// on a runtime whose pools connect lazily and are never used, so no database or broker is needed. A route
// or schema change then breaks `tsc -p ui/tsconfig.json` instead of a page at run time (ADR 0018).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tsImport } from 'tsx/esm/api';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'ui/src/api');
const load = (path) => tsImport(join(root, path), import.meta.url);

const { loadConfig } = await load('src/config.ts');
const { createLogger } = await load('src/logger.ts');
const { createRuntime } = await load('src/roles/runtime.ts');
const { heraldRegistry } = await load('src/aggregates/registry.ts');
const { buildApiServer } = await load('src/api/server.ts');

// An address nothing listens on: building the app must not touch the database (pg pools are lazy).
const config = loadConfig({
  DATABASE_URL: 'postgres://herald@127.0.0.1:9/herald_openapi_generator',
  HERALD_LOG_LEVEL: 'silent',
  HERALD_API_PORT: '0',
});
const logger = createLogger({ level: 'silent', pod: 'generate-ui-client' });
const runtime = createRuntime(config, logger, {
  registry: heraldRegistry,
  applicationName: 'herald-openapi',
});
const app = await buildApiServer({
  db: runtime.db,
  wakeups: runtime.notifier,
  listener: runtime.listener,
  config,
  registry: heraldRegistry,
  logger,
  readiness: async () => {
    throw new Error('generate-ui-client: readiness is never asked');
  },
});
const document = app.swagger();
await app.close();
await runtime.close();

mkdirSync(out, { recursive: true });
const json = `${JSON.stringify(document, null, 2)}\n`;
const jsonPath = join(out, 'openapi.json');
let previous = '';
try {
  previous = readFileSync(jsonPath, 'utf8');
} catch {}
if (previous !== json) writeFileSync(jsonPath, json);
execFileSync(
  process.execPath,
  [join(root, 'node_modules/openapi-typescript/bin/cli.js'), jsonPath, '-o', join(out, 'schema.d.ts')],
  { stdio: ['ignore', 'ignore', 'inherit'] },
);
const paths = Object.keys(document.paths ?? {}).length;
process.stderr.write(`generate-ui-client: ${paths} paths → ui/src/api/schema.d.ts\n`);
