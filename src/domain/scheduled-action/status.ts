/**
 * Scheduled-action vocabulary (seed 002): the statuses of the `scheduled_action` table, kept as the seed
 * spells them, and what a wait and a claim need beside them. Pure data shared by the decider, the state
 * table and the API.
 */

/** pending (waiting for its time or a signal), processing (claimed), done, failed, cancelled. */
export const ACTION_STATUSES = ['pending', 'processing', 'done', 'failed', 'cancelled'] as const;
export type ActionStatus = (typeof ACTION_STATUSES)[number];

/** normal: due at now + delay; waitForSignal (the seed's waitForTracking): due at the deadline unless a signal comes first. */
export const ACTION_MODES = ['normal', 'waitForSignal'] as const;
export type ActionMode = (typeof ACTION_MODES)[number];

/** Which config a claim runs: the action's own (`main`) or its wait's expiry branch (`expiry`). */
export const ACTION_BRANCHES = ['main', 'expiry'] as const;
export type ActionBranch = (typeof ACTION_BRANCHES)[number];

/** Why a claim happened: its time came, a signal unlocked it, an operator fired it, its wait expired, or a retry. */
export const CLAIM_TRIGGERS = ['due', 'signal', 'fire_now', 'deadline', 'retry', 'recovery'] as const;
export type ClaimTrigger = (typeof CLAIM_TRIGGERS)[number];

/** queue: the claim publishes `scheduled_action_fire` (scanner + worker); in-process: the claiming worker runs it. */
export const DELIVERIES = ['queue', 'in-process'] as const;
export type ActionDelivery = (typeof DELIVERIES)[number];

/** What a done action did: ran a branch, or expired with no branch to run. */
export const ACTION_OUTCOMES = ['executed', 'expired'] as const;
export type ActionOutcome = (typeof ACTION_OUTCOMES)[number];

/** Seed 002: batch size 500, max retries 3, stale processing 5 minutes. */
export const DEFAULT_MAX_RETRIES = 3;
