/**
 * What the partition tests count (ADR 0038): an effect is a row a consumer's handler writes in the same
 * transaction as its inbox claim (invariant 4), so a message id with two effect rows is a message handled
 * twice, while a redelivery the inbox absorbed leaves none. Also: which RabbitMQ node a named client
 * connection is on, from the cluster's own view.
 */
import type { Database } from '../../../src/ports/database.js';
import type { Handler } from '../../../src/worker/delivery-policy.js';
import { services } from '../support.js';

export async function createEffects(db: Database): Promise<void> {
  await db.query('create table ha_effect (message_id text not null, consumer text not null)');
}

/** A handler whose one effect is an `ha_effect` row, written in the inbox claim's transaction. */
export function effectHandler(consumer: string): Handler<unknown> {
  return async (message, tx) => {
    await tx.query('insert into ha_effect (message_id, consumer) values ($1, $2)', [
      message.messageId,
      consumer,
    ]);
  };
}

/** Per message id, how many effects; `twice` lists the ids with more than one. */
export async function effects(db: Database): Promise<{ ids: Set<string>; twice: string[] }> {
  const { rows } = await db.query<{ message_id: string; n: number }>(
    'select message_id, count(*)::int as n from ha_effect group by message_id',
  );
  return {
    ids: new Set(rows.map((r) => r.message_id)),
    twice: rows.filter((r) => r.n > 1).map((r) => r.message_id),
  };
}

/** The node (1..3) each open connection whose name starts with `prefix` is on, asked of node `askNode`. */
export async function rabbitNodesOf(
  prefix: string,
  askNode: number,
  urls: readonly string[],
): Promise<number[]> {
  const listed = JSON.parse(
    await services(
      'rabbitmqctl',
      String(askNode),
      'list_connections',
      'port',
      'client_properties',
      '--formatter',
      'json',
    ),
  ) as { port: number; client_properties: [string, string, unknown][] }[];
  return listed
    .filter((c) =>
      c.client_properties.some(
        ([key, , value]) => key === 'connection_name' && String(value).startsWith(prefix),
      ),
    )
    .map((c) => urls.findIndex((url) => Number(new URL(url).port) === c.port) + 1);
}
