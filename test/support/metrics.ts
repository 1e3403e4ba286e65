/** Reading a role endpoint over real HTTP: `/metrics` as samples, `/readyz` as its status and report. */
import type { ReadinessReport } from '../../src/health/readiness.js';

/** `name{labels} value` lines of a Prometheus text exposition, by `name{labels}`. */
export function samples(text: string): Map<string, number> {
  return new Map(
    text
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'))
      .map((line) => {
        const at = line.lastIndexOf(' ');
        return [line.slice(0, at), Number(line.slice(at + 1))] as const;
      }),
  );
}

export async function scrape(url: string): Promise<Map<string, number>> {
  const response = await fetch(`${url}/metrics`);
  if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`);
  return samples(await response.text());
}

export async function readiness(url: string): Promise<{ status: number; report: ReadinessReport }> {
  const response = await fetch(`${url}/readyz`);
  return { status: response.status, report: (await response.json()) as ReadinessReport };
}
