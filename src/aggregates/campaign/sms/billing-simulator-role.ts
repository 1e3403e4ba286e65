/**
 * `herald billing-simulator [--host <h>] [--port <p>] [--token <t>]… [--credit <org>:<amount>]…`: the
 * billing test server (billing-simulator.ts: its own ledger, every operation idempotent by its key, 402
 * on insufficient balance) as a process, for staging and manual runs of `HERALD_BILLING=http`. Credits
 * come from `--credit` or its control API (`POST /_simulator/organizations/<org>/credits`); it needs no
 * database and runs until SIGTERM, then logs each organization's balance.
 */
import { parse, UsageError } from '../../../cli/one-shot.js';
import type { Role } from '../../../registry/role.js';
import { startBillingSimulator } from './billing-simulator.js';

export const BILLING_SIMULATOR_DEFAULT_PORT = 9480;
const USAGE =
  'herald billing-simulator [--host <host>] [--port <port>] [--token <bearer>]… [--credit <organizationId>:<amount>]…';

const OPTIONS = {
  host: { type: 'string' },
  port: { type: 'string' },
  token: { type: 'string', multiple: true },
  credit: { type: 'string', multiple: true },
} as const;

/** `<organizationId>:<amount>`, the amount a non-negative decimal. */
export function parseCreditOption(value: string): { organizationId: string; amount: string } {
  const at = value.lastIndexOf(':');
  const amount = value.slice(at + 1);
  if (at <= 0 || !/^\d+(\.\d{1,4})?$/.test(amount))
    throw new UsageError(`--credit ${value}: expected <organizationId>:<amount> (e.g. org-1:500.00)`);
  return { organizationId: value.slice(0, at), amount };
}

export const billingSimulatorRole: Role = {
  summary: 'test double of a billing service over HTTP (its own ledger, idempotent keys, 402 when short)',
  usage: USAGE,
  async run({ argv, logger, signal }) {
    let host: string;
    let port: number;
    let credits: { organizationId: string; amount: string }[];
    let tokens: string[];
    try {
      const { values } = parse(argv, OPTIONS);
      host = values.host ?? '127.0.0.1';
      port = values.port === undefined ? BILLING_SIMULATOR_DEFAULT_PORT : Number(values.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535)
        throw new UsageError(`--port ${values.port}: not a port`);
      tokens = values.token ?? [];
      credits = (values.credit ?? []).map(parseCreditOption);
    } catch (error) {
      if (!(error instanceof UsageError)) throw error;
      process.stderr.write(`herald: ${error.message}\nusage: ${USAGE}\n`);
      return 2;
    }
    const simulator = await startBillingSimulator({ host, port, tokens, logger });
    for (const { organizationId, amount } of credits)
      simulator.credit(organizationId, amount, `cli-credit:${organizationId}:${amount}`);
    try {
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener('abort', () => resolve(), { once: true });
      });
    } finally {
      const organizations = [...new Set(simulator.entries().map((e) => e.organizationId))];
      await simulator.close();
      logger.info(
        { balances: Object.fromEntries(organizations.map((org) => [org, simulator.balance(org)])) },
        'billing simulator stopped',
      );
    }
    return 0;
  },
};
