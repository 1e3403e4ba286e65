/**
 * Heartbeats for long-running handlers. While `work` runs, `beat` is called every `intervalMs`
 * (e.g. to refresh `claimed_at = now()` on the claimed aggregate, guarded by status and epoch), so the
 * reaper does not take a live claim back. A heartbeat is a liveness hint only: if beats fail and the
 * reaper reclaims anyway, the claim's epoch changes and the fence discards this worker's late result
 * (invariant 5). So a failed beat is reported and the next one is tried; it never aborts the work.
 *
 * Beats never overlap (the next one is scheduled when the previous settles), and none runs after
 * withHeartbeat settles: it waits for a beat in progress, so a beat cannot land after the completion.
 */
export interface HeartbeatOptions {
  /** Called with each failed beat's error. Default: ignored. */
  onError?: (error: unknown) => void;
}

export async function withHeartbeat<T>(
  intervalMs: number,
  beat: () => Promise<void>,
  work: () => Promise<T>,
  options: HeartbeatOptions = {},
): Promise<T> {
  if (!Number.isFinite(intervalMs) || intervalMs <= 0) {
    throw new RangeError(`heartbeat interval must be a positive number of milliseconds, got ${intervalMs}`);
  }
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let beating: Promise<void> = Promise.resolve();

  const schedule = () => {
    timer = setTimeout(() => {
      timer = undefined;
      beating = (async () => {
        try {
          await beat();
        } catch (error) {
          try {
            options.onError?.(error);
          } catch {
            // a failing error reporter must not break the work either
          }
        }
      })();
      beating.then(() => {
        if (!stopped) schedule();
      });
    }, intervalMs);
  };

  schedule();
  try {
    return await work();
  } finally {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
    await beating;
  }
}
