/**
 * The rollout rule (ADR 0039): this code writes no event version the previous release cannot read, and
 * the check refuses a pair of releases that would (the fixture's N and N+2 side by side).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { heraldRegistry } from '../../src/aggregates/registry.js';
import { AggregateRegistry } from '../../src/registry/registry.js';
import type { ReleaseSql } from './release-sql.js';
import { SNAPSHOT_DIR } from './release-sql.js';
import { eventVersions, rolloutViolations } from './rollout-rule.js';
import { type Release, walletRegistration } from './wallet-releases.js';

const latest = readdirSync(SNAPSHOT_DIR)
  .filter((f) => f.endsWith('.json'))
  .map((f) => JSON.parse(readFileSync(join(SNAPSHOT_DIR, f), 'utf8')) as ReleaseSql)
  .sort((a, b) => a.version.localeCompare(b.version, undefined, { numeric: true }))
  .at(-1)!;

const wallet = (release: Release) => new AggregateRegistry([walletRegistration(release, 'q')]);

describe('the rollout rule: write only what the previous release reads', () => {
  it(`holds for this code against release ${latest.version}`, () => {
    expect(
      rolloutViolations(latest.eventsRead, eventVersions(heraldRegistry, 'writes'), latest.version),
    ).toEqual([]);
  });

  it('lets N+1 (reads 2, writes 1) follow N, and N+2 (writes 2) follow N+1', () => {
    expect(eventVersions(wallet('N+1'), 'reads')).toEqual({ wallet: { Credited: 2 } });
    expect(eventVersions(wallet('N+1'), 'writes')).toEqual({ wallet: { Credited: 1 } });
    expect(
      rolloutViolations(eventVersions(wallet('N'), 'reads'), eventVersions(wallet('N+1'), 'writes'), 'N'),
    ).toEqual([]);
    expect(
      rolloutViolations(eventVersions(wallet('N+1'), 'reads'), eventVersions(wallet('N+2'), 'writes'), 'N+1'),
    ).toEqual([]);
  });

  it('refuses N+2 straight after N: N could not read what N+2 writes', () => {
    expect(
      rolloutViolations(eventVersions(wallet('N'), 'reads'), eventVersions(wallet('N+2'), 'writes'), 'N'),
    ).toEqual([
      'wallet event Credited: written in version 2, but release N reads up to 1 — keep writing 1 (a downcaster) for one release',
    ]);
  });
});
