/**
 * The Helm chart (deploy/helm/herald) with the real tools: `helm lint`, then `helm template` for the
 * default and the production-like values (deploy/helm/herald/ci/production-values.yaml) validated by
 * `kubeconform -strict` against the Kubernetes JSON schemas (scripts/deploy-tools installs all three,
 * pinned), and the rendered objects checked for what the runbook relies on: one Deployment per role
 * running `herald <role>`, probes on /healthz and /readyz, a grace period, the migration as a
 * pre-install/pre-upgrade hook, a PodDisruptionBudget for every role with more than one replica.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';

const ROOT = join(import.meta.dirname, '..', '..');
const CHART = join(ROOT, 'deploy', 'helm', 'herald');
const PRODUCTION = join(CHART, 'ci', 'production-values.yaml');
const ROLES = ['api', 'scanner', 'relay', 'worker', 'tick', 'projector', 'maintenance'];

let tools: Record<string, string>;

beforeAll(() => {
  execFileSync('bash', [join(ROOT, 'scripts', 'deploy-tools'), 'ensure'], { stdio: 'inherit' });
  const env = execFileSync('bash', [join(ROOT, 'scripts', 'deploy-tools'), 'env'], { encoding: 'utf8' });
  tools = Object.fromEntries(
    [...env.matchAll(/^export (\w+)=(.*)$/gm)].map((m) => [m[1]!, m[2]!.replace(/^'|'$/g, '')]),
  );
}, 900_000);

const helm = (...args: string[]) => execFileSync(tools.HELM!, args, { encoding: 'utf8', cwd: ROOT });

interface K8sObject {
  kind: string;
  metadata: { name: string; annotations?: Record<string, string> };
  // biome-ignore lint/suspicious/noExplicitAny: rendered manifests are checked field by field below
  spec: any;
}

function render(...values: string[]): { yaml: string; objects: K8sObject[] } {
  const yaml = helm(
    'template',
    'herald',
    CHART,
    '--kube-version',
    tools.KUBE_VERSION!,
    ...values.flatMap((v) => ['-f', v]),
  );
  const objects = parseAllDocuments(yaml)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
  return { yaml, objects };
}

function kubeconform(yaml: string): string {
  return execFileSync(
    tools.KUBECONFORM!,
    [
      '-strict',
      '-summary',
      '-schema-location',
      `${tools.KUBE_SCHEMAS}/{{ .ResourceKind }}{{ .KindSuffix }}.json`,
      '-schema-location',
      `${join(ROOT, 'deploy', 'helm', 'schemas')}/{{ .ResourceKind }}{{ .KindSuffix }}.json`,
      '-',
    ],
    { input: yaml, encoding: 'utf8' },
  );
}

describe('the Helm chart', () => {
  it('passes helm lint with the default and the production-like values', () => {
    const lint = (...values: string[]) =>
      helm('lint', CHART, '--strict', '--kube-version', tools.KUBE_VERSION!, ...values);
    expect(lint()).toMatch(/0 chart\(s\) failed/);
    expect(lint('-f', PRODUCTION)).toMatch(/0 chart\(s\) failed/);
  });

  it.each([
    ['default values', []],
    ['production-like values', [PRODUCTION]],
  ])('renders valid Kubernetes objects for %s (kubeconform -strict)', (_name, values) => {
    const { yaml, objects } = render(...values);
    const summary = kubeconform(yaml);
    expect(summary).toMatch(/Invalid: 0, Errors: 0, Skipped: 0/);
    expect(summary).toMatch(new RegExp(`Valid: ${objects.length},`));
  });

  it('one Deployment per role running `herald <role>`, probed on /healthz and /readyz, with a grace period', () => {
    const { objects } = render();
    const deployments = objects.filter((o) => o.kind === 'Deployment');
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual(ROLES.map((r) => `herald-${r}`).sort());
    for (const deployment of deployments) {
      const pod = deployment.spec.template.spec;
      const [container] = pod.containers;
      expect(container.args).toEqual([deployment.metadata.name.replace('herald-', '')]);
      expect(container.livenessProbe.httpGet.path).toBe('/healthz');
      expect(container.readinessProbe.httpGet.path).toBe('/readyz');
      expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(10); // above the API's shutdown timeout
      expect(pod.securityContext.runAsNonRoot).toBe(true);
      expect(
        container.env.find((e: { name: string }) => e.name === 'HERALD_POD').valueFrom.fieldRef.fieldPath,
      ).toBe('metadata.name');
    }
  });

  it('runs the migration as a pre-install/pre-upgrade Job and guards every multi-replica role with a PDB', () => {
    const { objects } = render(PRODUCTION);
    const job = objects.find((o) => o.kind === 'Job')!;
    expect(job.metadata.annotations!['helm.sh/hook']).toBe('pre-install,pre-upgrade');
    expect(job.spec.template.spec.containers[0].args).toEqual(['migrate']);
    const budgets = objects.filter((o) => o.kind === 'PodDisruptionBudget').map((o) => o.metadata.name);
    // Every role has ≥ 2 replicas here, the SMS gateway (off by default) included.
    expect(budgets.sort()).toEqual([...ROLES, 'sms-gateway'].map((r) => `herald-${r}`).sort());
    expect(objects.some((o) => o.kind === 'ServiceMonitor')).toBe(true);
    const hpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler')!;
    expect(hpa.spec.scaleTargetRef.name).toBe('herald-relay');
    // The HPA owns the relay's replica count: the Deployment must not set one.
    const relay = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'herald-relay')!;
    expect(relay.spec.replicas).toBeUndefined();
    // An existing Secret is referenced, none is rendered.
    expect(objects.some((o) => o.kind === 'Secret')).toBe(false);
  });
});
