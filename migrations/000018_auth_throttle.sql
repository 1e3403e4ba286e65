-- The HTTP API's authentication throttle (issue 23, src/api/auth-throttle.ts): failed authentications
-- per client address in a fixed window on the database clock, shared by every API process. A row is a
-- client address with the start of its current window and the failures counted in it; the failure path
-- upserts it (a window that ended starts again at 1) and deletes a few rows whose window ended long ago,
-- so the table holds at most the addresses that failed recently.
create table auth_failure (
  client        text primary key,
  window_start  timestamptz not null,
  failures      integer not null check (failures > 0)
);
-- Pruning: rows by the start of their window.
create index auth_failure_window_idx on auth_failure (window_start);
