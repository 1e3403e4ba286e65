#!/usr/bin/env node
// The `herald` command: runs the compiled CLI (npm run build), or the TypeScript source through tsx.
// In a checkout where src/ changed after the last build, it says so (the compiled code is older).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const compiled = join(root, 'dist', 'main.js');

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

if (existsSync(compiled)) {
  const source = join(root, 'src');
  if (existsSync(source) && newestMtime(source) > statSync(compiled).mtimeMs) {
    process.stderr.write('herald: src/ changed after the last build; running dist/ (npm run build to update)\n');
  }
  await import(compiled);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(join(root, 'src', 'main.ts'));
}
