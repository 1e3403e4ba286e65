/**
 * The folder of Herald's own package: where `migrations/`, `dist/ui` and `dist/contracts` are found,
 * whether the code runs from src/ (tsx), from dist/ as tsc wrote it, or from the one-file bundle
 * `dist/herald.js` the CLI starts (ADR 0025): each has its module at another depth below the root, so
 * the root is found by walking up to the package.json that names `herald`, not by counting `..`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;

export function packageRoot(): string {
  if (root !== undefined) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (
      existsSync(manifest) &&
      (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === 'herald'
    ) {
      root = dir;
      return dir;
    }
    const parent = dirname(dir);
    if (parent === dir)
      throw new Error(`herald: no package.json named "herald" above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}
