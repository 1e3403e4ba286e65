/**
 * The asynchronous projections Herald runs (`herald projector`) and can rebuild
 * (`herald projections rebuild <name>`), by name. A new projection adds one entry.
 */
import { ValidationError } from '../errors.js';
import { DISPATCH_STATS, dispatchStatsProjection } from './dispatch-stats.js';
import type { Projection } from './projection.js';

export const PROJECTIONS: ReadonlyMap<string, Projection> = new Map([
  [DISPATCH_STATS, dispatchStatsProjection],
]);

export function projectionNamed(name: string): Projection {
  const projection = PROJECTIONS.get(name);
  if (!projection) {
    throw new ValidationError(
      `no projection named '${name}' (known: ${[...PROJECTIONS.keys()].join(', ')})`,
      {
        name,
      },
    );
  }
  return projection;
}
