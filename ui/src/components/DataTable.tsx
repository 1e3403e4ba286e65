/**
 * A dense, readable table: typed columns, optional row selection (checkboxes with select-all for bulk
 * commands), an empty state, and a "Load more" footer for cursor-paginated lists.
 */
import type { ReactNode } from 'react';

export interface Column<T> {
  /** Unique per table; also the field shown when there is no render. */
  key: string;
  header: ReactNode;
  render?: (row: T) => ReactNode;
  align?: 'left' | 'right' | 'center';
  width?: string | number;
  /** Monospace (ids, keys, timestamps). */
  mono?: boolean;
  className?: string;
}

export interface DataTableProps<T, K extends string | number> {
  columns: Column<T>[];
  rows: readonly T[] | undefined;
  rowKey: (row: T) => K;
  /** Selection for bulk actions: checkboxes appear when given. */
  selected?: ReadonlySet<K>;
  onSelectedChange?: (next: Set<K>) => void;
  /** Rows that may not be selected (e.g. already handled). */
  selectable?: (row: T) => boolean;
  onRowClick?: (row: T) => void;
  loading?: boolean;
  empty?: ReactNode;
  hasMore?: boolean;
  loadingMore?: boolean;
  onLoadMore?: () => void;
  /** data-testid / aria-label of the table. */
  label?: string;
  rowClassName?: (row: T) => string | undefined;
}

export function DataTable<T, K extends string | number>({
  columns,
  rows,
  rowKey,
  selected,
  onSelectedChange,
  selectable,
  onRowClick,
  loading,
  empty = 'Nothing here.',
  hasMore,
  loadingMore,
  onLoadMore,
  label,
  rowClassName,
}: DataTableProps<T, K>) {
  const list = rows ?? [];
  const withSelection = selected !== undefined && onSelectedChange !== undefined;
  const candidates = list.filter((row) => !selectable || selectable(row)).map(rowKey);
  const allSelected = candidates.length > 0 && candidates.every((k) => selected?.has(k));
  const span = columns.length + (withSelection ? 1 : 0);

  const toggle = (key: K) => {
    if (!withSelection) return;
    const next = new Set(selected);
    if (next.has(key)) next.delete(key);
    else next.add(key);
    onSelectedChange(next);
  };

  return (
    <div className="table-wrap">
      <table className="data-table" aria-label={label} data-testid={label}>
        <thead>
          <tr>
            {withSelection ? (
              <th className="select-cell">
                <input
                  type="checkbox"
                  aria-label="Select all"
                  checked={allSelected}
                  disabled={candidates.length === 0}
                  onChange={() => onSelectedChange(allSelected ? new Set() : new Set(candidates))}
                />
              </th>
            ) : null}
            {columns.map((c) => (
              <th key={c.key} style={{ textAlign: c.align ?? 'left', width: c.width }}>
                {c.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {list.length === 0 ? (
            <tr>
              <td colSpan={span} className="empty-cell">
                {loading ? 'Loading…' : empty}
              </td>
            </tr>
          ) : (
            list.map((row) => {
              const key = rowKey(row);
              const canSelect = !selectable || selectable(row);
              return (
                <tr
                  key={key}
                  data-row-key={key}
                  className={
                    [
                      onRowClick ? 'clickable' : '',
                      selected?.has(key) ? 'selected' : '',
                      rowClassName?.(row) ?? '',
                    ]
                      .filter(Boolean)
                      .join(' ') || undefined
                  }
                  onClick={onRowClick ? () => onRowClick(row) : undefined}
                >
                  {withSelection ? (
                    <td
                      className="select-cell"
                      onClick={(e) => e.stopPropagation()}
                      onKeyDown={(e) => e.stopPropagation()}
                    >
                      <input
                        type="checkbox"
                        aria-label={`Select ${key}`}
                        checked={selected.has(key)}
                        disabled={!canSelect}
                        onChange={() => toggle(key)}
                      />
                    </td>
                  ) : null}
                  {columns.map((c) => (
                    <td
                      key={c.key}
                      style={{ textAlign: c.align ?? 'left' }}
                      className={
                        [c.mono ? 'mono' : '', c.className ?? ''].filter(Boolean).join(' ') || undefined
                      }
                    >
                      {c.render ? c.render(row) : String((row as Record<string, unknown>)[c.key] ?? '—')}
                    </td>
                  ))}
                </tr>
              );
            })
          )}
        </tbody>
      </table>
      {hasMore && onLoadMore ? (
        <div className="table-footer">
          <button type="button" onClick={onLoadMore} disabled={loadingMore}>
            {loadingMore ? 'Loading…' : 'Load more'}
          </button>
        </div>
      ) : null}
    </div>
  );
}
