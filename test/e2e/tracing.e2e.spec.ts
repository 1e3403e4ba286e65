/**
 * One trace from an API request to the consumer's effect (ADR 0017), received by a local
 * OTLP/HTTP receiver speaking the real protocol (the exporter's JSON encoding over HTTP): a campaign
 * created and scheduled through `POST /v1/campaigns`, claimed by the scanner a second later, published
 * by the relay and delivered by the worker to LINE (the API fixture's LINE test server) — every span carries the request's trace id, and the chain
 * request → command → claim → publish → process → effect is parent to child. Uses the seed's fixed LINE
 * queues: serial project.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTracing, type TracingHandle } from '../../src/adapters/otel/sdk.js';
import { waitFor } from '../../src/testing/wait.js';
import { type ApiFixture, dbTime, lineCampaignBody, startTestApi } from '../api/support/api.js';
import { lineAcceptancesPerChunk, lineEnv } from '../support/line.js';
import { type RunningRoles, startRoles } from '../support/roles.js';

interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
}

let receiver: Server;
const received: ReceivedSpan[] = [];
const contentTypes = new Set<string>();
let tracing: TracingHandle;
let api: ApiFixture;
let roles: RunningRoles | undefined;

beforeAll(async () => {
  receiver = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.method === 'POST' && request.url === '/v1/traces') {
        contentTypes.add(String(request.headers['content-type']));
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceSpans: { scopeSpans: { spans: ReceivedSpan[] }[] }[];
        };
        for (const resource of body.resourceSpans)
          for (const scope of resource.scopeSpans) received.push(...scope.spans);
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const { port } = receiver.address() as { port: number };
  const otel = {
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
    OTEL_BSP_SCHEDULE_DELAY: '100',
  };
  Object.assign(process.env, otel); // the exporter reads its endpoint from the environment
  tracing = startTracing({ enabled: true, serviceName: 'herald-test', exportDelayMs: 100 });
  api = await startTestApi({ ...otel, HERALD_RELAY_IDLE_POLL_MS: '200' });
  roles = startRoles(api.t.config({ ...otel, HERALD_RELAY_IDLE_POLL_MS: '200', ...lineEnv(api.line) }), {
    scanner: true,
    relay: true,
    worker: true,
  });
});

afterAll(async () => {
  await roles?.stop();
  await api?.close();
  await tracing?.shutdown();
  await new Promise((resolve) => receiver.close(resolve));
  delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  delete process.env.OTEL_BSP_SCHEDULE_DELAY;
});

describe('tracing', () => {
  it('a campaign scheduled through the API and dispatched is one trace from the request to the effect', async () => {
    const key = await api.key('org-1');
    const startAt = await dbTime(api.t, 2);
    const created = await api.request('POST', '/v1/campaigns', {
      key,
      body: lineCampaignBody({ startAt }),
      headers: { 'idempotency-key': 'trace-1' },
    });
    expect(created.status).toBe(201);
    const campaignId = created.body.campaignId as string;
    await waitFor(
      async () =>
        (await api.request('GET', `/v1/campaigns/${campaignId}`, { key })).body.status === 'COMPLETED',
      { what: 'the campaign delivered', timeoutMs: 30_000 },
    );
    const campaign = (await api.request('GET', `/v1/campaigns/${campaignId}`, { key })).body;
    expect(lineAcceptancesPerChunk(api.line.stats('channel-oa-1').requests, campaign)).toEqual([1]);
    expect(api.line.violationCount).toBe(0);
    const chain = [
      'HTTP POST /v1/campaigns',
      'command campaign',
      'claim campaign.claim',
      'publish ',
      'process ',
      'effect ',
    ];
    const spans = await waitFor(
      async () => {
        await tracing.flush();
        const request = received.find((s) => s.name === 'HTTP POST /v1/campaigns');
        if (!request) return false;
        const trace = received.filter((s) => s.traceId === request.traceId);
        return chain.every((name) => trace.some((s) => s.name.startsWith(name))) && trace;
      },
      { what: 'the spans of the whole chain', timeoutMs: 20_000 },
    );
    // Parent to child, in causal order: each step's span descends from the one before.
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const ancestors = (span: ReceivedSpan): string[] => {
      const names: string[] = [];
      for (let at = span.parentSpanId; at && byId.has(at); at = byId.get(at)!.parentSpanId)
        names.push(byId.get(at)!.name);
      return names;
    };
    const effect = spans.find((s) => s.name.startsWith('effect '))!;
    const lineage = [effect.name, ...ancestors(effect)].reverse();
    const firsts = chain.map((name) => lineage.findIndex((n) => n.startsWith(name)));
    expect(
      firsts.every((index) => index >= 0),
      lineage.join(' → '),
    ).toBe(true);
    expect([...firsts].sort((a, b) => a - b)).toEqual(firsts);
    expect(lineage[0]).toBe('HTTP POST /v1/campaigns'); // the request is the root
    expect([...contentTypes]).toEqual(['application/json']);
  });
});
