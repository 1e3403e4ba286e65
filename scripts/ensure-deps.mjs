// Installs the project's npm dependencies when they are missing, so `npm run demo` and
// `npm test` work on a fresh clone with no separate install step.
import { execSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';

const marker = 'node_modules/.package-lock.json';
const stale = !existsSync(marker) || statSync('package.json').mtimeMs > statSync(marker).mtimeMs;
if (stale) {
  // `npm install` rather than `npm ci`: npm 11 leaves some platform-only optional packages out of the
  // lock file (vite's napi-windows-process-start-time) and `npm ci` then refuses the whole install.
  // With a lock file present `npm install` still installs the locked versions.
  const command = 'npm install --no-audit --no-fund';
  process.stderr.write(`herald: installing dependencies (${command})\n`);
  execSync(command, { stdio: 'inherit' });
}
