/**
 * The dashboard's static assets (ADR 0018): the build of ui/ (dist/ui, `npm run build`) served at /ui
 * by @fastify/static, no CDN and nothing fetched at run time. Hashed assets (/ui/assets/*) are cached
 * for a year as immutable; every other path under /ui/ that is not a file is a client route and gets
 * index.html (never cached, so a new build is picked up at once). Before the UI is built, /ui answers
 * a 503 problem saying how to build it. GET / redirects to /ui/. Hidden from the OpenAPI document:
 * these are pages, not API operations.
 */
import { existsSync, statSync } from 'node:fs';
import { join, normalize, resolve, sep } from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { packageRoot } from '../package-root.js';
import { PROBLEM_CONTENT_TYPE, problem } from './problem.js';

/** dist/ui of the package. */
export const DEFAULT_UI_ROOT = join(packageRoot(), 'dist', 'ui');

export const uiRoutes: FastifyPluginAsync<{ root?: string | undefined }> = async (app, options) => {
  const root = resolve(options.root ?? DEFAULT_UI_ROOT);
  await app.register(fastifyStatic, { root, serve: false });

  const notBuilt = (request: FastifyRequest, reply: FastifyReply) =>
    reply
      .code(503)
      .type(PROBLEM_CONTENT_TYPE)
      .send(
        problem(503, 'dashboard not built: run npm run build', {
          instance: request.url.split('?')[0]!,
          requestId: request.id,
          code: 'UI_NOT_BUILT',
        }),
      );

  const isFile = (path: string) => {
    try {
      return statSync(path).isFile();
    } catch {
      return false;
    }
  };

  const serve = async (request: FastifyRequest, reply: FastifyReply, relative: string) => {
    if (!existsSync(join(root, 'index.html'))) return notBuilt(request, reply);
    const wanted = normalize(relative).replace(/^([/\\])+/, '');
    const absolute = resolve(root, wanted);
    const inside = absolute === root || absolute.startsWith(root + sep);
    if (inside && wanted !== '' && isFile(absolute)) {
      const hashed = wanted.startsWith(`assets${sep}`) || wanted.startsWith('assets/');
      return reply.sendFile(
        wanted,
        hashed ? { maxAge: '365d', immutable: true } : { maxAge: 0, cacheControl: true },
      );
    }
    // A client route (or a missing file): the app's shell, which routes itself.
    void reply.header('cache-control', 'no-cache');
    return reply.sendFile('index.html', { cacheControl: false });
  };

  app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/ui/', 302));
  app.get('/ui', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/ui/', 301));
  app.get('/ui/', { schema: { hide: true } }, (request, reply) => serve(request, reply, ''));
  app.get('/ui/*', { schema: { hide: true } }, (request, reply) =>
    serve(request, reply, (request.params as { '*': string })['*']),
  );
};
