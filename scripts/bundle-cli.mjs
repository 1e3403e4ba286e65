#!/usr/bin/env node
// The `herald` command as one file: dist/main.js and every Herald module it imports, bundled by esbuild
// into dist/herald.js, which bin/herald.js starts (ADR 0025). The packages stay external (node_modules,
// as installed). Loading ~840 compiled modules one by one cost each start about half a second of CPU
// more than this one file (`node dist/main.js --help` 1.6 s of CPU, the bundle 1.1 s): every role a pod
// restarts, and every CLI call. Runs after tsc in `npm run build:server` and in the image's build stage;
// `node scripts/bundle-cli.mjs <folder>` bundles another tsc output folder (the build check's).
import { join } from 'node:path';
import { build } from 'esbuild';

const dist = process.argv[2] ?? 'dist';
await build({
  entryPoints: [join(dist, 'main.js')],
  outfile: join(dist, 'herald.js'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  packages: 'external',
  legalComments: 'none',
  logLevel: 'warning',
});
