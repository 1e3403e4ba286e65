import { defineConfig } from 'vitest/config';

// Test tiers by suffix: *.unit.spec.ts are pure; *.int.spec.ts talk to the real services started by
// scripts/services (npm test starts them and exports their URLs) and run in parallel, each file on
// its own database and uniquely named queues. The `serial` project holds the files that use the
// seeds' fixed queue names, stop a shared broker, or (`*.serial.spec.ts`) assert exact results of
// gap-safe reads, which any transaction open anywhere on the server delays (xmin is cluster-wide):
// npm test runs it after the others, one file at a time. The browser projects (test/ui/**/*.browser.spec.ts)
// drive Debian's Chromium against `herald api` and the roles as child processes (the seeds' queue names
// too, each spec in a RabbitMQ vhost of its own): they run last, `browser` two files at a time (npm test
// passes --maxWorkers 2), then `browser-sms` one at a time — its specs send SMS through the Kafka
// topics, whose fixed names and consumer groups no vhost separates.
//
// Workers: vitest's default is one fewer than the CPUs, i.e. one on a 2-core machine, which would run
// the integration files one after the other although most of their time is spent waiting on the
// services and on child processes. HERALD_TEST_WORKERS (default 3) sets how many files run at once.
const workers = Number(process.env.HERALD_TEST_WORKERS ?? 3);
// The integration files share their worker's modules (isolate: false: each file's imports would
// otherwise cost ~2.7 s of its own), except those that assert the process's metrics registry, which
// another file's roles winding down in the same worker could move: they get a fresh process each.
const processMetrics = [
  'test/observability/role-endpoint.int.spec.ts',
  'test/deploy/alerts.int.spec.ts',
  'test/sms/smpp-gateway.int.spec.ts',
];
const browserSms = [
  'test/ui/campaigns.browser.spec.ts',
  'test/ui/campaign-build.browser.spec.ts',
  'test/ui/recipients.browser.spec.ts',
  'test/ui/screenshots-campaigns-cron.browser.spec.ts',
];
const serial = ['test/e2e/**/*.e2e.spec.ts', 'test/**/*broker-outage*.spec.ts', 'test/**/*.serial.spec.ts'];

export default defineConfig({
  test: {
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.unit.spec.ts'], isolate: false } },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.int.spec.ts'],
          exclude: [...serial, ...processMetrics],
          isolate: false,
        },
      },
      {
        extends: true,
        test: { name: 'integration-isolated', include: processMetrics },
      },
      { extends: true, test: { name: 'serial', include: serial, fileParallelism: false } },
      {
        extends: true,
        test: { name: 'browser', include: ['test/ui/**/*.browser.spec.ts'], exclude: browserSms },
      },
      { extends: true, test: { name: 'browser-sms', include: browserSms, fileParallelism: false } },
      // The high-availability tests (ADR 0037) on the clusters (`npm run test:ha`; npm test starts them
      // in the background and runs this project beside the serial and browser tiers: scripts/test-tiers.sh):
      // one file at a time, since they stop the clusters' nodes and fail the database over.
      { extends: true, test: { name: 'ha', include: ['test/ha/**/*.ha.spec.ts'], fileParallelism: false } },
    ],
    // Role processes the tests spawn (the CLI, children) inherit these: each serves its metrics
    // endpoint on a free loopback port instead of the default 9464 (ADR 0013).
    env: { HERALD_METRICS_HOST: '127.0.0.1', HERALD_METRICS_PORT: '0' },
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    maxWorkers: workers,
    reporters: ['default'],
  },
});
