/**
 * `herald line-simulator [--host <h>] [--port <p>] [--channel <channelId>:<token>]…`: the LINE test
 * server (server.ts) as a process, for the demo, end-to-end tests and benchmarks. It needs no database;
 * channels come from `--channel` or its control API (`/_simulator/…`), and it runs until SIGTERM.
 */
import { parse, UsageError } from '../../../../cli/one-shot.js';
import type { Role } from '../../../../registry/role.js';
import { startLineSimulator } from './server.js';

export const LINE_SIMULATOR_DEFAULT_PORT = 9470;
const USAGE = 'herald line-simulator [--host <host>] [--port <port>] [--channel <channelId>:<token>]…';

const OPTIONS = {
  host: { type: 'string' },
  port: { type: 'string' },
  channel: { type: 'string', multiple: true },
} as const;

/** `<channelId>:<token>` (the token may itself contain `:`). */
export function parseChannelOption(value: string): { channelId: string; token: string } {
  const at = value.indexOf(':');
  if (at <= 0 || at === value.length - 1)
    throw new UsageError(`--channel ${value}: expected <channelId>:<token>`);
  return { channelId: value.slice(0, at), token: value.slice(at + 1) };
}

export const lineSimulatorRole: Role = {
  summary: 'test double of the LINE Messaging API (validates every request against LINE’s OpenAPI)',
  usage: USAGE,
  async run({ argv, logger, signal }) {
    let host: string;
    let port: number;
    const tokens = new Map<string, string[]>();
    try {
      const { values } = parse(argv, OPTIONS);
      host = values.host ?? '127.0.0.1';
      port = values.port === undefined ? LINE_SIMULATOR_DEFAULT_PORT : Number(values.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535)
        throw new UsageError(`--port ${values.port}: not a port`);
      for (const option of values.channel ?? []) {
        const { channelId, token } = parseChannelOption(option);
        tokens.set(channelId, [...(tokens.get(channelId) ?? []), token]);
      }
    } catch (error) {
      if (!(error instanceof UsageError)) throw error;
      process.stderr.write(`herald: ${error.message}\nusage: ${USAGE}\n`);
      return 2;
    }
    const simulator = await startLineSimulator({
      host,
      port,
      logger,
      channels: [...tokens].map(([channelId, channelTokens]) => ({ channelId, tokens: channelTokens })),
    });
    try {
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener('abort', () => resolve(), { once: true });
      });
    } finally {
      const { violationCount, unauthenticated } = simulator.stats();
      await simulator.close();
      logger.info({ violationCount, unauthenticated }, 'line simulator stopped');
    }
    return 0;
  },
};
