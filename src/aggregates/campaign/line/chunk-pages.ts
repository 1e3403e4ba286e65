/**
 * The recipients of a multicast's chunks (ADR 0021): chunk k is the ≤ 500 user ids of the sealed audience
 * after the cursor chunk k − 1 ended at, in byte order. They are read several chunks at a time (one
 * statement for up to `chunksPerRead` chunks) and one read ahead: the read of the chunks after chunk k
 * starts while chunk k is in flight, so their ids are there once chunk k is recorded. Reading is all this
 * does; when a chunk is sent is the delivery's business (never before the chunk before it is recorded).
 * A read starts at a recorded cursor, so every chunk holds the same ids however they were read.
 */
import { LINE_MULTICAST_MAX } from '../../../domain/campaign/line.js';

/** Chunks one read fetches: 5,000 ids, one statement for ten LINE calls. */
export const LINE_CHUNKS_PER_READ = 10;

const noop = () => {};

export class ChunkPages {
  /** Ids read after `after`, beginning with the next chunk's. */
  private ids: readonly string[] = [];
  /** The cursor `ids` follow (undefined: nothing read yet). */
  private after: string | null | undefined = undefined;
  private ahead: { after: string; read: Promise<string[]>; settled: Promise<void> } | null = null;

  constructor(
    private readonly read: (after: string | null, limit: number) => Promise<string[]>,
    private readonly chunksPerRead = LINE_CHUNKS_PER_READ,
  ) {}

  /** The ids of the chunk after `cursor`, with `chunksLeft` chunks (this one included) left to send. */
  async page(cursor: string | null, chunksLeft: number): Promise<readonly string[]> {
    if (this.after !== cursor || this.ids.length === 0) {
      const ahead = this.ahead;
      this.ahead = null;
      this.ids =
        ahead !== null && ahead.after === cursor
          ? await ahead.read
          : await this.read(cursor, this.limit(chunksLeft));
      this.after = cursor;
    }
    return this.ids.slice(0, LINE_MULTICAST_MAX);
  }

  /**
   * While `page` (the current chunk) is in flight: starts reading the chunks after it, unless they were
   * read already, with `chunksLeft` chunks left after it.
   */
  readAhead(page: readonly string[], chunksLeft: number): void {
    if (chunksLeft <= 0 || this.ahead !== null || page.length < this.ids.length) return;
    const after = page[page.length - 1]!;
    const read = this.read(after, this.limit(chunksLeft));
    // Awaited (a failure thrown) when its chunk comes.
    this.ahead = { after, read, settled: read.then(noop, noop) };
  }

  /** Resolves once no read is running (so a delivery records with no second connection in use). */
  settled(): Promise<void> {
    return this.ahead?.settled ?? Promise.resolve();
  }

  /** `page` (the current chunk) is recorded: the next chunk starts after it. */
  done(page: readonly string[]): void {
    if (page.length === 0) return;
    // What is left of the read follows the recorded chunk.
    this.ids = this.ids.slice(page.length);
    this.after = page[page.length - 1]!;
  }

  private limit(chunks: number): number {
    return Math.min(chunks, this.chunksPerRead) * LINE_MULTICAST_MAX;
  }
}
