// Builds the dashboard (`npm run build:ui`: typed client from the server's OpenAPI document, tsc of
// ui/, vite build into dist/ui) when dist/ui is missing or stale, so `npm test` and `npm run demo`
// serve a dashboard that matches the code. "Stale" = a hash of ui/** (generated files aside), the API
// the slices and the domain schemas its document is made from, the generator and package-lock.json differs from
// the one recorded by the last build (dist/.herald-ui-hash). `--mark` records the current hash.
import { execSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const marker = join(root, 'dist/.herald-ui-hash');
const GENERATED = new Set(['ui/src/api/openapi.json', 'ui/src/api/schema.d.ts']);
const INPUTS = [
  'ui',
  'src/api',
  'src/aggregates',
  'src/domain',
  'src/registry',
  'scripts/generate-ui-client.mjs',
  'scripts/openapi-clients.ts',
  'package-lock.json',
];

function files(path) {
  const full = join(root, path);
  if (!existsSync(full)) return [];
  if (!statSync(full).isDirectory()) return [path];
  return readdirSync(full)
    .filter((name) => name !== 'node_modules' && name !== 'dist')
    .sort()
    .flatMap((name) => files(relative(root, join(full, name))));
}

export function uiFingerprint() {
  const hash = createHash('sha256');
  for (const file of INPUTS.flatMap(files)) {
    if (GENERATED.has(file)) continue;
    hash.update(`${file}\0`);
    hash.update(readFileSync(join(root, file)));
  }
  return hash.digest('hex');
}

const fingerprint = uiFingerprint();
if (process.argv.includes('--mark')) {
  mkdirSync(dirname(marker), { recursive: true });
  writeFileSync(marker, `${fingerprint}\n`);
} else {
  const built = existsSync(marker) ? readFileSync(marker, 'utf8').trim() : '';
  if (built !== fingerprint || !existsSync(join(root, 'dist/ui/index.html'))) {
    process.stderr.write('herald: building the dashboard (npm run build:ui)\n');
    try {
      execSync('npm run --silent build:ui', { stdio: 'inherit', cwd: root });
    } catch (error) {
      process.stderr.write('herald: the dashboard did not build (see above)\n');
      process.exit(error.status ?? 1);
    }
  }
}
