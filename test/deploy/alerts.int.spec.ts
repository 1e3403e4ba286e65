/**
 * The alert rules (deploy/prometheus/herald-alerts.yaml) with Prometheus's own tool: `promtool check
 * rules`, then `promtool test rules` on herald-alerts.test.yaml (every alert fires after its `for` on
 * the series it watches, with its summary, and stays quiet while healthy). Every herald_* series the
 * rules and the Grafana dashboard (deploy/grafana/herald-dashboard.json) query is one Herald's
 * registries define, so renaming a metric breaks this test rather than an alert in production.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { httpMeters } from '../../src/api/http-metrics.js';
import { heraldMetrics } from '../../src/observability/metrics.js';

const ROOT = join(import.meta.dirname, '..', '..');
const RULES = join(ROOT, 'deploy', 'prometheus', 'herald-alerts.yaml');
const RULE_TESTS = join(ROOT, 'deploy', 'prometheus', 'herald-alerts.test.yaml');
const DASHBOARD = join(ROOT, 'deploy', 'grafana', 'herald-dashboard.json');

let promtool: string;
beforeAll(() => {
  execFileSync('bash', [join(ROOT, 'scripts', 'deploy-tools'), 'ensure'], { stdio: 'inherit' });
  const env = execFileSync('bash', [join(ROOT, 'scripts', 'deploy-tools'), 'env'], { encoding: 'utf8' });
  promtool = /^export PROMTOOL=(.*)$/m.exec(env)![1]!.replace(/^'|'$/g, '');
}, 600_000);

/** herald_* metric names in PromQL, without the histogram suffixes. */
function seriesIn(expressions: string[]): Set<string> {
  const names = expressions.flatMap((e) => [...e.matchAll(/\b(herald_[a-z0-9_]+)/g)].map((m) => m[1]!));
  return new Set(names.map((n) => n.replace(/_(bucket|sum|count)$/, '')));
}

describe('alert rules and dashboard', () => {
  it('pass promtool check rules and their promtool unit tests', () => {
    expect(execFileSync(promtool, ['check', 'rules', RULES], { encoding: 'utf8' })).toMatch(
      /SUCCESS: \d+ rules found/,
    );
    const tested = execFileSync(promtool, ['test', 'rules', RULE_TESTS], {
      encoding: 'utf8',
      cwd: join(ROOT, 'deploy', 'prometheus'),
    });
    expect(tested).toMatch(/SUCCESS/);
  });

  it('every alert has a unit test, and every series they query exists in Herald', async () => {
    const rules = parse(readFileSync(RULES, 'utf8')) as {
      groups: { rules: { alert: string; expr: string }[] }[];
    };
    const alerts = rules.groups.flatMap((g) => g.rules);
    const tests = readFileSync(RULE_TESTS, 'utf8');
    for (const { alert } of alerts) expect(tests, `a test for ${alert}`).toContain(`alertname: ${alert}`);

    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
      panels: { targets: { expr: string }[] }[];
    };
    const queried = seriesIn([
      ...alerts.map((a) => a.expr),
      ...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)),
    ]);
    httpMeters(heraldMetrics.registry); // the API's series, in the same registry as in `herald api`
    const defined = new Set((await heraldMetrics.registry.getMetricsAsJSON()).map((m) => m.name));
    expect([...queried].filter((name) => !defined.has(name))).toEqual([]);
    expect(queried.size).toBeGreaterThan(10);
  });
});
