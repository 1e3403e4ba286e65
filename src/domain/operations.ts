/**
 * Operation catalogues (ADR 0020): an aggregate's operator commands — the ones the API, the CLI and
 * the dashboard offer — each said once: the command type it sends, the statuses it is allowed in and
 * any further rule on the state. The decider refuses a command through its entry (the same reason
 * whoever asks), and the API's views carry the operations the current state allows, so the dashboard
 * renders its buttons from the server's answer instead of a copy of the rules. Pure.
 */

export interface Operation<State> {
  /** The decider's command type. */
  readonly command: string;
  /** Statuses it is allowed in (a function when they depend on the state, e.g. the channel). */
  readonly statuses: readonly string[] | ((state: State) => readonly string[]);
  /** Why it is refused in this state although the status allows it (null: allowed); after the status. */
  readonly rule?: (state: State) => string | null;
  /** How a refusal by status reads (default: the aggregate's wording, e.g. `allowed only in …`). */
  readonly statusRefusal?: (state: State) => string;
  /**
   * Whether the API and the dashboard offer it for this state at all (e.g. a resend only for an SMS
   * campaign); the decider does not consult it. Default: always.
   */
  readonly offered?: (state: State) => boolean;
}

export type OperationCatalogue<State> = Readonly<Record<string, Operation<State>>>;

const allowedOnlyIn = (statuses: readonly string[]) => `allowed only in ${statuses.join(', ')}`;

/**
 * Why `operation` is refused in `state`, or null when it is allowed: a refusal by status reads as the
 * entry's `statusRefusal` says, else as `refusedStatus` (the aggregate's wording).
 */
export function operationRefusal<State extends { readonly status: string }>(
  operation: Operation<State>,
  state: State,
  refusedStatus: (allowed: readonly string[]) => string = allowedOnlyIn,
): string | null {
  const statuses = typeof operation.statuses === 'function' ? operation.statuses(state) : operation.statuses;
  if (!statuses.includes(state.status)) return operation.statusRefusal?.(state) ?? refusedStatus(statuses);
  return operation.rule?.(state) ?? null;
}

/** The operations of `catalogue` a caller may ask for in `state` (in the catalogue's order). */
export function availableOperations<
  State extends { readonly status: string },
  Catalogue extends OperationCatalogue<State>,
>(catalogue: Catalogue, state: State): (keyof Catalogue & string)[] {
  return Object.entries(catalogue)
    .filter(([, op]) => (op.offered?.(state) ?? true) && operationRefusal(op, state) === null)
    .map(([name]) => name as keyof Catalogue & string);
}
