/**
 * Versioned wire messages (ADR 0039, zero-downtime upgrades). Every outbox row carries the schema
 * version of its payload in the `x-herald-message-version` header (an integer; absent means 1, which is
 * what every message before versions was). The version is a *major* version: an additive change (a new
 * field) keeps it, and consumers ignore fields they do not know, so an old consumer reads a newer
 * producer's message of the same version. A change that removes, renames or re-means a field bumps it;
 * a consumer then declares an upcaster per step and sees only the current shape, and a consumer that
 * meets a version newer than it reads dead-letters the message with that reason (never guesses): an
 * operator re-drives it once the consumer is upgraded. The rollout rule is the events' one: a producer
 * sends a version only once the previous release's consumers read it.
 */
import { DeadLetterError, PermanentError, ValidationError } from '../errors.js';
import { HEADER } from './headers.js';

/** Converts a payload from version `from` to `from + 1`. */
export interface MessageUpcaster {
  readonly from: number;
  up(payload: unknown): unknown;
}

/** What a consumer reads: versions 1 to `reads`, upcast to `reads` by the chain. */
export class MessageSchema {
  readonly reads: number;
  private readonly chain: ((payload: unknown) => unknown)[];

  constructor(upcasters: readonly MessageUpcaster[] = []) {
    const sorted = [...upcasters].sort((a, b) => a.from - b.from);
    sorted.forEach((u, i) => {
      if (u.from !== i + 1) {
        throw new ValidationError(
          `message upcasters must go 1→2, 2→3, … without gaps or repeats (found one from ${u.from} at step ${i + 1})`,
        );
      }
    });
    this.chain = sorted.map((u) => u.up);
    this.reads = sorted.length + 1;
  }

  /** The payload in the current shape; a newer version is dead-lettered, a malformed header rejected. */
  upcast(payload: unknown, version: number): unknown {
    if (version > this.reads) {
      throw new DeadLetterError(
        `message schema version ${version} is newer than this consumer reads (up to ${this.reads}): upgrade the consumer, then re-drive the message`,
        { version, reads: this.reads },
      );
    }
    let current = payload;
    for (let v = version; v < this.reads; v++) current = this.chain[v - 1]!(current);
    return current;
  }
}

/** Version 1 only: a consumer that declares no upcasters. */
export const VERSION_ONE = new MessageSchema();

/** The version a message's headers carry (absent: 1); a header that is not a positive integer is refused. */
export function messageVersionOf(headers: Readonly<Record<string, unknown>>): number {
  const raw = headers[HEADER.messageVersion];
  if (raw === undefined || raw === null) return 1;
  const text = Buffer.isBuffer(raw) ? raw.toString('utf8') : String(raw);
  const value = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value) || value < 1) {
    throw new PermanentError(`${HEADER.messageVersion} must be a positive integer (got '${text}')`);
  }
  return value;
}
