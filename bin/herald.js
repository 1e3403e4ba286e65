#!/usr/bin/env node
// The `herald` command: runs the compiled CLI (dist/, which the package ships and `npm run build`
// makes in a checkout). In a checkout without dist/ it runs the TypeScript source through tsx; where
// neither is there, it says what to do instead of failing on a missing module. In a checkout where
// src/ changed after the last build, it says so (the compiled code is older).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const compiled = join(root, 'dist', 'main.js');
const source = join(root, 'src', 'main.ts');

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

async function tsxRegister() {
  try {
    return (await import('tsx/esm/api')).register;
  } catch {
    return undefined;
  }
}

if (existsSync(compiled)) {
  if (existsSync(source) && newestMtime(join(root, 'src')) > statSync(compiled).mtimeMs) {
    process.stderr.write('herald: src/ changed after the last build; running dist/ (npm run build to update)\n');
  }
  await import(compiled);
} else {
  const register = existsSync(source) ? await tsxRegister() : undefined;
  if (!register) {
    process.stderr.write(
      `herald: ${compiled} is missing: the package was built without its dist/ (run \`npm run build\` in a checkout; an installed package ships it)\n`,
    );
    process.exit(1);
  }
  register();
  await import(source);
}
