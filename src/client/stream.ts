/**
 * The live stream (`GET /v1/stream`, ADR 0028) as an async iterator: `for await (const event of
 * client.stream({ topics }))`. The body is parsed as text/event-stream by eventsource-parser (field
 * order, CR/LF/CRLF line ends, chunks split anywhere, comments, `retry:`), so the client does not
 * depend on how the server frames its writes. The stream carries no data, only "this topic changed at
 * <at>": when the connection drops the client reconnects after the server's `retry:` interval, sending
 * `Last-Event-ID` when the server gave event ids (Herald's do not today), and then yields one event per
 * topic marked `reconnected: true`, since changes made while it was away were not told. Refusals (401,
 * 403, a limit still reached after the retries) end the iteration with a HeraldProblemError. `break`
 * or the AbortSignal closes the connection.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { STREAM_TOPICS } from './generated/operations.js';

export type StreamTopic = (typeof STREAM_TOPICS)[number];

/** Something of `topic` changed in the caller's organization (at most one a second per topic). */
export interface StreamEvent {
  topic: StreamTopic;
  /** When the server told it (ISO 8601); for a `reconnected` event, when the client reconnected. */
  at: string;
  /** After a reconnection: changes made while the stream was down were not told; refetch. */
  reconnected: boolean;
  /** The event's id, when the server gives one. */
  id?: string;
}

export interface StreamOptions {
  /** The topics to hear (default: all of them). */
  topics?: readonly StreamTopic[];
  /** Closes the stream; the iteration then ends without an error. */
  signal?: AbortSignal;
  /** Reconnect when the connection drops (default true); false ends the iteration instead. */
  reconnect?: boolean;
  /** Called each time the stream is open (the server has registered it): events from then on are told. */
  onOpen?: () => void;
}

/** What the stream needs from the client: open one connection, wait, read the clock. */
export interface StreamTransport {
  open(
    topics: readonly StreamTopic[],
    lastEventId: string | undefined,
    signal: AbortSignal,
  ): Promise<Response>;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  now(): number;
}

/** The server's `retry: 5000` until it says otherwise. */
const DEFAULT_RETRY_MS = 5_000;

export async function* liveStream(
  transport: StreamTransport,
  options: StreamOptions = {},
): AsyncGenerator<StreamEvent, void, undefined> {
  const topics = options.topics?.length ? [...options.topics] : [...STREAM_TOPICS];
  const controller = new AbortController();
  const abort = () => controller.abort(options.signal?.reason);
  if (options.signal?.aborted) return;
  options.signal?.addEventListener('abort', abort, { once: true });
  let lastEventId: string | undefined;
  let retryMs = DEFAULT_RETRY_MS;
  let reconnected = false;
  try {
    while (!controller.signal.aborted) {
      let response: Response;
      try {
        response = await transport.open(topics, lastEventId, controller.signal);
      } catch (error) {
        if (controller.signal.aborted) return;
        throw error;
      }
      options.onOpen?.();
      if (reconnected) {
        const at = new Date(transport.now()).toISOString();
        for (const topic of topics) yield { topic, at, reconnected: true };
      }
      const queue: EventSourceMessage[] = [];
      const parser = createParser({
        onEvent: (message) => queue.push(message),
        onRetry: (ms) => {
          retryMs = ms;
        },
      });
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          parser.feed(value);
          while (queue.length > 0) {
            const message = queue.shift()!;
            if (message.id !== undefined) lastEventId = message.id;
            yield toEvent(message);
          }
        }
      } catch (error) {
        // A dropped connection is reconnected below; an abort ends the iteration.
        if (controller.signal.aborted) return;
        if (options.reconnect === false) throw error;
      } finally {
        await reader.cancel().catch(() => {});
      }
      if (options.reconnect === false || controller.signal.aborted) return;
      try {
        await transport.sleep(retryMs, controller.signal);
      } catch {
        return;
      }
      reconnected = true;
    }
  } finally {
    options.signal?.removeEventListener('abort', abort);
    // `break` in the caller's loop lands here: the connection is closed, not left to the server's timeout.
    controller.abort();
  }
}

function toEvent(message: EventSourceMessage): StreamEvent {
  let at = '';
  try {
    const data = JSON.parse(message.data) as { at?: unknown };
    if (typeof data.at === 'string') at = data.at;
  } catch {
    // Not JSON: the event still says its topic changed.
  }
  return {
    topic: (message.event ?? 'message') as StreamTopic,
    at,
    reconnected: false,
    ...(message.id !== undefined ? { id: message.id } : {}),
  };
}
