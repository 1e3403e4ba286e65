/**
 * ChunkPages (src/aggregates/campaign/line/chunk-pages.ts): a multicast's chunk k is the ≤ 500 ids after
 * the cursor chunk k − 1 ended at, however many chunks one read fetched and whatever was read ahead.
 */
import { describe, expect, it } from 'vitest';
import { ChunkPages } from '../../src/aggregates/campaign/line/chunk-pages.js';

const id = (i: number) => `U${i.toString(16).padStart(32, '0')}`;
const audience = Array.from({ length: 2_345 }, (_, i) => id(i));

/** A sealed audience's keyset reads, logged as `after-index:limit`. */
function reader() {
  const reads: string[] = [];
  const read = async (after: string | null, limit: number) => {
    const from = after === null ? 0 : audience.indexOf(after) + 1;
    reads.push(`${from}:${limit}`);
    return audience.slice(from, from + limit);
  };
  return { reads, read };
}

/** Runs a whole delivery's reads: page, read ahead, done, chunk after chunk. */
async function deliver(pages: ChunkPages, chunks: number): Promise<string[][]> {
  const sent: string[][] = [];
  let cursor: string | null = null;
  for (let chunk = 0; chunk < chunks; chunk++) {
    const page = await pages.page(cursor, chunks - chunk);
    pages.readAhead(page, chunks - chunk - 1);
    await pages.settled();
    sent.push([...page]);
    pages.done(page);
    cursor = page[page.length - 1]!;
  }
  return sent;
}

describe('ChunkPages', () => {
  it.each([1, 2, 3, 10])(
    'reading %i chunk(s) at a time gives the planned chunks, each id once',
    async (n) => {
      const { reads, read } = reader();
      const sent = await deliver(new ChunkPages(read, n), 5);
      expect(sent.map((c) => c.length)).toEqual([500, 500, 500, 500, 345]);
      expect(sent.flat()).toEqual(audience);
      expect(reads).toHaveLength(Math.ceil(5 / n));
    },
  );

  it('reads the next chunks while the current one is in flight, starting after it', async () => {
    const { reads, read } = reader();
    const pages = new ChunkPages(read, 2);
    const first = await pages.page(null, 5);
    pages.readAhead(first, 4);
    expect(reads).toEqual(['0:1000']); // chunk 1 is already read
    pages.done(first);
    const second = await pages.page(first[499]!, 4);
    pages.readAhead(second, 3);
    expect(reads).toEqual(['0:1000', '1000:1000']);
  });

  it('a chunk tried again (429, 401) is the same page, and the read ahead is not repeated', async () => {
    const { reads, read } = reader();
    const pages = new ChunkPages(read, 1);
    const page = await pages.page(null, 5);
    pages.readAhead(page, 4);
    const again = await pages.page(null, 5);
    pages.readAhead(again, 4);
    expect(again).toEqual(page);
    expect(reads).toEqual(['0:500', '500:500']);
  });

  it('a cursor it did not read up to (a resumed delivery) is read afresh', async () => {
    const { reads, read } = reader();
    const pages = new ChunkPages(read, 10);
    const page = await pages.page(id(999), 3);
    expect(page[0]).toBe(id(1_000));
    expect(reads).toEqual(['1000:1500']);
  });

  it('a failed read ahead fails the chunk that needs it, not the one in flight', async () => {
    let calls = 0;
    const pages = new ChunkPages(async (after, limit) => {
      calls++;
      if (after !== null) throw new Error('connection lost');
      return audience.slice(0, limit);
    }, 1);
    const page = await pages.page(null, 2);
    pages.readAhead(page, 1);
    await pages.settled();
    pages.done(page);
    await expect(pages.page(page[499]!, 1)).rejects.toThrow('connection lost');
    expect(calls).toBe(2);
  });
});
