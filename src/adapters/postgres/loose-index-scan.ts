/**
 * The distinct values of a B-tree index's leading column by a loose index scan (PostgreSQL has no skip
 * scan): a recursive CTE that descends the index once per distinct value, however many rows each value
 * has. Used where a few distinct values (stream types, inbox consumers) lead a large index.
 */

/**
 * `with recursive <name> (<column>) as (…)`: the CTE, without the final select; `<column>` of its last
 * row is null (the descent that found nothing), so readers filter `<column> is not null`.
 */
export function distinctLeadingValues(name: string, table: string, column: string): string {
  return `with recursive ${name} (${column}) as (
    (select ${column} from ${table} order by ${column} limit 1)
    union all
    select (select x.${column} from ${table} x where x.${column} > p.${column} order by x.${column} limit 1)
      from ${name} p
     where p.${column} is not null
  )`;
}
