# syntax=docker/dockerfile:1.7
# Herald's container image: one image, every role (`herald <role>`), see deploy/ and docs/operations.md.
#   docker build -t herald:dev .
#   docker run --rm herald:dev scanner --help
# Stage 1 compiles src/ to dist/ and builds the dashboard into dist/ui with the full dependency tree; stage 2 installs production
# dependencies only and runs as an unprivileged user.

ARG NODE_VERSION=20.20-bookworm-slim

FROM node:${NODE_VERSION} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts/bundle-cli.mjs ./scripts/
RUN npx tsc -p tsconfig.build.json && node scripts/bundle-cli.mjs
# The dashboard (dist/ui, served by `herald api` at /ui): the typed client from the API's own OpenAPI
# document, a type check, the Vite build (ADR 0018).
COPY ui ./ui
COPY scripts/generate-ui-client.mjs ./scripts/
RUN node scripts/generate-ui-client.mjs && npx tsc -p ui/tsconfig.json --noEmit && npx vite build --config ui/vite.config.ts

FROM node:${NODE_VERSION} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY migrations ./migrations
RUN ln -s /app/bin/herald.js /usr/local/bin/herald && chmod +x /app/bin/herald.js
# node:*-slim ships the unprivileged user `node` (uid 1000).
USER node
# /metrics, /healthz, /readyz of every long-running role (HERALD_METRICS_PORT), and the API (HERALD_API_PORT).
EXPOSE 9464 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:' + (process.env.HERALD_METRICS_PORT || 9464) + '/healthz').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"
ENTRYPOINT ["herald"]
CMD ["--help"]
