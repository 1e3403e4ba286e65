#!/usr/bin/env node
// The `herald` command: runs the compiled CLI (dist/, which the package ships and `npm run build` or
// `npm run build:server` makes in a checkout). Roles always start from the compiled build: through tsx
// a role took seconds more CPU to start, and a restarted pod is that much longer away (issue 23). Where
// dist/ is missing it says what to run; in a checkout where src/ changed after the last build, it says
// so (the compiled code is older). `npm run herald` runs the source, for development.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// dist/herald.js is the one-file bundle of dist/main.js (scripts/bundle-cli.mjs): the same code, a faster start.
const bundled = join(root, 'dist', 'herald.js');
const compiled = existsSync(bundled) ? bundled : join(root, 'dist', 'main.js');
const sources = join(root, 'src');

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

if (!existsSync(compiled)) {
  process.stderr.write(
    existsSync(sources)
      ? `herald: ${compiled} is missing: run \`npm run build:server\` (or \`npm run build\`, with the dashboard) first; \`npm run herald\` runs the source\n`
      : `herald: ${compiled} is missing: the package was built without its dist/ (an installed package ships it)\n`,
  );
  process.exit(1);
}
if (existsSync(sources) && newestMtime(sources) > statSync(compiled).mtimeMs) {
  process.stderr.write('herald: src/ changed after the last build; running dist/ (npm run build:server to update)\n');
}
await import(compiled);
