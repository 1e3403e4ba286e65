// The dashboard's build (issue 14): Vite + React, served by `herald api` at /ui from dist/ui. Every asset
// is bundled (no CDN, no web fonts), hashed file names so the server can cache them for good. `vite` in
// ui/ (dev server) proxies /v1 and /docs to HERALD_API_URL (default http://127.0.0.1:8080).
import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));
const apiUrl = process.env.HERALD_API_URL ?? 'http://127.0.0.1:8080';

export default defineConfig({
  root,
  base: '/ui/',
  plugins: [react()],
  build: {
    outDir: fileURLToPath(new URL('../dist/ui', import.meta.url)),
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 1000,
  },
  server: {
    proxy: { '/v1': apiUrl, '/openapi.json': apiUrl, '/docs': apiUrl },
  },
});
