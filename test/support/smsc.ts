/**
 * The SMSC simulator as an in-process fixture (like test/support/line.ts for LINE): an SMPP server on a
 * free loopback port with one account, its behaviour from the test's configuration, and the gateway
 * settings that bind to it.
 */
import type { SmsSettings } from '../../src/aggregates/campaign/sms/settings.js';
import { SmscSimulator } from '../../src/aggregates/campaign/sms/smsc-simulator.js';
import type { Logger } from '../../src/logger.js';
import { testLogger } from './roles.js';

export const SMSC_SYSTEM_ID = 'herald';
export const SMSC_PASSWORD = 'secret';

export async function startTestSmsc(options: {
  behaviour: SmsSettings['simulator'];
  tps?: number;
  now?: () => number;
  logger?: Logger;
}): Promise<SmscSimulator> {
  return new SmscSimulator({
    port: 0,
    accounts: new Map([[SMSC_SYSTEM_ID, SMSC_PASSWORD]]),
    behaviour: options.behaviour,
    ...(options.tps !== undefined ? { tps: options.tps } : {}),
    ...(options.now ? { now: options.now } : {}),
    logger: options.logger ?? testLogger(),
  }).start();
}

/** Gateway settings (environment) for one SMSC connection `sim` serving every route channel. */
export function gatewayEnv(
  port: number,
  smsc: Record<string, unknown> = {},
  env: Record<string, string> = {},
): Record<string, string> {
  return {
    HERALD_SMS_GATEWAY_SMSCS: JSON.stringify([
      {
        name: 'sim',
        host: '127.0.0.1',
        port,
        systemId: SMSC_SYSTEM_ID,
        channels: ['*'],
        binds: { transceivers: 1 },
        window: 10,
        tpsPerBind: 2_000,
        ...smsc,
      },
    ]),
    HERALD_SMS_GATEWAY_PASSWORDS: JSON.stringify({ sim: SMSC_PASSWORD }),
    HERALD_SMS_GATEWAY_RESPONSE_TIMEOUT_SECONDS: '2',
    HERALD_SMS_GATEWAY_UNCONFIRMED_AFTER_SECONDS: '4',
    HERALD_SMS_GATEWAY_ENQUIRE_LINK_SECONDS: '5',
    HERALD_SMS_GATEWAY_RECONNECT_MIN_MS: '100',
    HERALD_SMS_GATEWAY_RECONNECT_MAX_MS: '1000',
    HERALD_SMS_GATEWAY_POLL_MS: '50',
    ...env,
  };
}
