/**
 * The browser-test harness itself (test/ui/support/browser.ts): what it must catch, it catches — a
 * console error, an uncaught page error, an HTTP error load nobody declared, a request off the
 * dashboard's origin (a CDN) — and a declared one passes. Without this, a spec "without console errors"
 * could pass with a harness that hears nothing.
 */
import { describe, expect, it } from 'vitest';
import { useDashboard } from './support/browser.js';

const ui = useDashboard({ ownBroker: false });

describe('browser harness', () => {
  it('records console errors, page errors, undeclared HTTP errors and off-origin requests', async () => {
    const p = await ui.page();
    await p.goto('/signin');
    await p.page.getByLabel('API key').waitFor();
    expect(p.problems).toEqual([]); // a signed-out visit fails no request (GET /v1/session/status: 200)
    await p.page.evaluate("console.error('boom from the page')");
    await p.page.evaluate("setTimeout(() => { throw new Error('uncaught in the page') }, 0)");
    await p.page.evaluate("fetch('/v1/no-such-route').catch(() => {})");
    await p.page.evaluate("fetch('http://192.0.2.1:9/cdn.js').catch(() => {})");
    const wanted = [
      /console error: boom from the page/,
      /page error: uncaught in the page/,
      /failed load 404 \/v1\/no-such-route/,
      /off-origin request/,
    ];
    await expect
      .poll(() => wanted.every((w) => p.problems.some((problem) => w.test(problem))), { timeout: 10_000 })
      .toBe(true);
    // Declared as expected, an HTTP error load is not a problem.
    const before = p.problems.length;
    p.allowHttp({ path: '/v1/another-missing-route', status: 404 });
    await p.page.evaluate("fetch('/v1/another-missing-route').catch(() => {})");
    await p.page.evaluate("fetch('/v1/no-such-route-2').catch(() => {})");
    await expect
      .poll(() => p.problems.some((x) => x.includes('/v1/no-such-route-2')), { timeout: 10_000 })
      .toBe(true);
    expect(p.problems.slice(before).filter((x) => x.includes('another-missing-route'))).toEqual([]);
    // This test wanted them: clear, so the harness's own after-test check passes.
    p.problems.splice(0);
  });
});
