/**
 * pino JSON logger. Lines about a message carry `correlationId`, `aggregateId` (stream id) and
 * `messageId`, bound through `logger.child({...})` at the point where those ids are known.
 */
import { type Logger, pino } from 'pino';

export type { Logger };

export function createLogger(options: { level: string; pod: string; role?: string }): Logger {
  return pino({
    level: options.level,
    base: { pod: options.pod, ...(options.role ? { role: options.role } : {}) },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  });
}

/** A silent logger for library callers and tests that pass none. */
export const silentLogger: Logger = pino({ level: 'silent' });
