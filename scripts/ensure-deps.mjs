// Installs the project's npm dependencies when they are missing or stale, so `npm run demo` and
// `npm test` work on a fresh clone with no separate install step. "Stale" = package.json or
// package-lock.json changed since the last install this script ran (a hash kept in node_modules).
import { execSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const marker = 'node_modules/.herald-deps';
const hash = createHash('sha256');
for (const file of ['package.json', 'package-lock.json']) {
  if (existsSync(file)) hash.update(readFileSync(file));
}
const fingerprint = hash.digest('hex');
const installed = existsSync(marker) ? readFileSync(marker, 'utf8').trim() : '';
if (installed !== fingerprint) {
  // `npm install` rather than `npm ci`: npm 11 leaves some platform-only optional packages out of the
  // lock file (vite's napi-windows-process-start-time) and `npm ci` then refuses the whole install.
  // With a lock file present `npm install` still installs the locked versions.
  const command = 'npm install --no-audit --no-fund';
  process.stderr.write(`herald: installing dependencies (${command})\n`);
  execSync(command, { stdio: 'inherit' });
  writeFileSync(marker, `${fingerprint}\n`);
}
