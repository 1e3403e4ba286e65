/**
 * `herald sms-gateway`'s Prometheus series, on the process's registry (`heraldMetrics`, served at
 * /metrics by every role; ADR 0013, ADR 0022): submit_sm outcomes by SMSC (accepted, throttled,
 * retryable, permanent, unconfirmed, not_written), receipts recorded and malformed PDUs, and the binds
 * up per SMSC and direction. Observability only: no decision reads them.
 */
import { Counter, Gauge } from 'prom-client';
import { heraldMetrics } from '../../../../observability/metrics.js';

export type SubmitOutcome =
  | 'accepted'
  | 'throttled'
  | 'retryable'
  | 'permanent'
  | 'unconfirmed'
  | 'not_written';

const submits = new Counter({
  name: 'herald_sms_gateway_submits_total',
  help: 'submit_sm written by herald sms-gateway, by SMSC and outcome (not_written: never left the process)',
  labelNames: ['smsc', 'outcome'] as const,
  registers: [heraldMetrics.registry],
});

const receipts = new Counter({
  name: 'herald_sms_gateway_receipts_total',
  help: 'deliver_sm recorded by herald sms-gateway, by SMSC and kind (receipt, not_understood, malformed_pdu)',
  labelNames: ['smsc', 'kind'] as const,
  registers: [heraldMetrics.registry],
});

const binds = new Gauge({
  name: 'herald_sms_gateway_binds',
  help: 'SMPP binds up in this process, by SMSC and mode (transceiver, transmitter, receiver)',
  labelNames: ['smsc', 'mode'] as const,
  registers: [heraldMetrics.registry],
});

export const gatewayMeters = {
  submit(smsc: string, outcome: SubmitOutcome): void {
    submits.inc({ smsc, outcome });
  },
  receipt(smsc: string, kind: 'receipt' | 'not_understood' | 'malformed_pdu', count = 1): void {
    receipts.inc({ smsc, kind }, count);
  },
  bind(smsc: string, mode: string, delta: 1 | -1): void {
    binds.inc({ smsc, mode }, delta);
  },
};
