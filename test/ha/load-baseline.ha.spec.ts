/**
 * The load harness on healthy clusters (test/ha/support/load.ts): every acknowledged command's effect
 * arrives once and the money balances, the baseline the failure tests compare against.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatReport, type HaLoad, startHaLoad } from './support/load.js';

let load: HaLoad;
beforeAll(async () => {
  load = await startHaLoad();
}, 120_000);
afterAll(async () => load?.close(), 60_000);

describe('load harness', () => {
  it('healthy clusters: every acknowledged effect once, money balanced', async () => {
    await load.run(Number(process.env.HERALD_HA_LOAD_SECONDS ?? 10) * 1_000);
    const report = await load.report(60_000);
    console.log(formatReport(report));
    expect(report.ok, formatReport(report)).toBe(true);
  });
});
