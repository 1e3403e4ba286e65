/**
 * `herald cron …`: the cron jobs from the command line (list, show, create, pause, resume, delete, trigger,
 * runs, ledger, upcoming, backfill with --dry-run), over the same CronService the library exposes: one
 * command, one transaction, database time (invariants 1 and 6). Options are strict (a typo is a usage
 * error, exit 2); a job is named by id, or by name with --organization; --json prints one JSON document.
 * ADR 0011.
 */
import type { ParseArgsConfig } from 'node:util';
import { createDatabase } from '../../adapters/postgres/database.js';
import { CoalescingNotifier } from '../../adapters/postgres/notifications.js';
import { ORGANIZATION_OPTION, out, parse, servicesOn, UsageError } from '../../cli/one-shot.js';
import type { ExistingCronJob } from '../../domain/cron-job.js';
import type { ExistingJobRun } from '../../domain/job-run.js';
import type { Role, RoleContext } from '../../registry/role.js';
import type { CronServices } from './routes.js';
import type { CronService } from './service.js';
import type { CronConfig } from './settings.js';

// Every subcommand also takes --organization <id> (a job named by name), --by <actor> and --json.
const USAGE = [
  'herald cron list [--organization <id>] [--all]',
  'show <job>',
  'create --organization <id> --name <text> --schedule <expr> [--tz <zone>] --type ping|webhook|slack|email --payload <JSON> ' +
    '[--overlap allow|skip|buffer-one] [--catch-up skip-missed|run-latest|run-all] [--grace-ms <n>] [--window-ms <n>] [--cap <n>] ' +
    '[--dst-ambiguous first|last|both] [--dst-missing shift|skip] [--timeout-ms <n>] [--retries <n>] [--retry-delay-ms <n>] [--paused]',
  'pause <job> --reason <text>',
  'resume|delete|trigger <job>',
  'runs|ledger <job> [--from <time>] [--to <time>] [--limit <n>]',
  'upcoming <job> [--count <n>]',
  'backfill <job> --from <time> --to <time> [--dry-run]',
].join(' | ');

const COMMON = {
  ...ORGANIZATION_OPTION,
  by: { type: 'string' },
  json: { type: 'boolean' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

const parseWith = <T extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: T) =>
  parse(argv, { ...COMMON, ...options });

const int = (value: string | undefined, name: string): number | undefined => {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n)) throw new UsageError(`--${name} must be an integer, got '${value}'`);
  return n;
};

function describeJob(job: ExistingCronJob): string {
  const next =
    job.status === 'active'
      ? `next ${job.nextRunAt ?? 'never'}`
      : job.status === 'paused'
        ? `paused by ${job.pausedBy}: ${job.pausedReason}`
        : 'deleted';
  return `${job.jobId}  ${job.name}  '${job.schedule}' ${job.timezone}  ${job.jobType}  ${job.status}  ${next}`;
}

function describeRun(run: ExistingJobRun): string {
  const span = run.spanCount ? ` (${run.spanCount} occurrences through ${run.spanLast})` : '';
  const result = run.responseStatus !== null ? ` status ${run.responseStatus}` : '';
  const error = run.error ? ` error: ${run.error}` : run.reason ? ` (${run.reason})` : '';
  return `${run.scheduledFor}  ${run.fate.padEnd(15)} ${run.status.padEnd(18)} attempts ${run.attempts}/${run.maxAttempts}${result}  ${run.runId}${span}${error}`;
}

async function withService(
  context: RoleContext<CronConfig>,
  work: (cron: CronService) => Promise<number>,
): Promise<number> {
  const { config } = context;
  const db = createDatabase({
    url: config.databaseUrl,
    schema: config.schema,
    poolSize: 2,
    applicationName: 'herald-cron',
  });
  // Wakes the relays (messages of manual and backfilled runs) and the scanners after each commit.
  const notifier = new CoalescingNotifier(db, 0);
  try {
    const { cron } = servicesOn<CronServices>(context, db, { wakeups: notifier });
    return await work(cron);
  } finally {
    notifier.close();
    await db.close();
  }
}

async function cronCommand(context: RoleContext<CronConfig>): Promise<number> {
  const [sub, ...argv] = context.argv;
  try {
    return await withService(context, (cron) => subcommand(cron, sub, argv, context));
  } catch (error) {
    if (error instanceof UsageError || !sub) {
      process.stderr.write(`herald: ${(error as Error).message}\nusage: ${USAGE}\n`);
      return 2;
    }
    throw error;
  }
}

async function subcommand(
  cron: CronService,
  sub: string | undefined,
  argv: string[],
  context: RoleContext<CronConfig>,
): Promise<number> {
  const actor = (by: string | undefined) => by ?? `cli:${context.config.pod}`;
  const job = async (ref: string | undefined, org: string | undefined) => {
    if (!ref) throw new UsageError(`herald cron ${sub}: which job? (an id, or a name with --organization)`);
    return cron.find(ref, org);
  };
  const print = (json: boolean | undefined, value: unknown, text: () => void) => {
    if (json) out(JSON.stringify(value, null, 2));
    else text();
    return 0;
  };
  switch (sub) {
    case 'list': {
      const { values } = parseWith(argv, { all: { type: 'boolean' } });
      const jobs = await cron.list({
        ...(values.organization ? { organizationId: values.organization } : {}),
        includeDeleted: values.all ?? false,
      });
      return print(values.json, jobs, () => {
        for (const j of jobs) out(describeJob(j));
        out(`${jobs.length} job(s)`);
      });
    }
    case 'show': {
      const { values, positionals } = parseWith(argv, {});
      const j = await job(positionals[0], values.organization);
      const [counts, upcoming] = await Promise.all([cron.countRuns(j.jobId), cron.upcoming(j.jobId, 5)]);
      return print(values.json, { job: j, runs: counts, upcoming }, () => {
        out(describeJob(j));
        out(
          `  organization ${j.organizationId}; overlap ${j.overlap}; catch-up ${JSON.stringify(j.catchUp)}; DST ${JSON.stringify(j.dst)}`,
        );
        out(
          `  timeout ${j.timeoutMs} ms; retries ${JSON.stringify(j.retry)}; created ${j.createdAt}; updated ${j.updatedAt}`,
        );
        out(
          `  runs: ${
            Object.entries(counts)
              .map(([s, n]) => `${s}=${n}`)
              .join(' ') || 'none'
          }`,
        );
        out(
          `  upcoming: ${upcoming.map((o) => `${new Date(o.at).toISOString()} (${o.wall} ${j.timezone}${o.kind === 'regular' ? '' : `, ${o.kind}`})`).join(', ') || 'none'}`,
        );
      });
    }
    case 'create': {
      const { values } = parseWith(argv, {
        name: { type: 'string' },
        schedule: { type: 'string' },
        tz: { type: 'string' },
        type: { type: 'string' },
        payload: { type: 'string' },
        overlap: { type: 'string' },
        'catch-up': { type: 'string' },
        'grace-ms': { type: 'string' },
        'window-ms': { type: 'string' },
        cap: { type: 'string' },
        'dst-ambiguous': { type: 'string' },
        'dst-missing': { type: 'string' },
        'timeout-ms': { type: 'string' },
        retries: { type: 'string' },
        'retry-delay-ms': { type: 'string' },
        paused: { type: 'boolean' },
      });
      for (const required of ['organization', 'name', 'schedule', 'type', 'payload'] as const) {
        if (!values[required]) throw new UsageError(`herald cron create: --${required} is required`);
      }
      let payload: unknown;
      try {
        payload = JSON.parse(values.payload!);
      } catch (error) {
        throw new UsageError(`--payload is not JSON: ${(error as Error).message}`);
      }
      const catchUp = {
        ...(values['catch-up'] ? { mode: values['catch-up'] } : {}),
        ...(values['grace-ms'] ? { graceMs: int(values['grace-ms'], 'grace-ms') } : {}),
        ...(values['window-ms'] ? { windowMs: int(values['window-ms'], 'window-ms') } : {}),
        ...(values.cap ? { cap: int(values.cap, 'cap') } : {}),
      };
      const retry = {
        ...(values.retries ? { maxRetries: int(values.retries, 'retries') } : {}),
        ...(values['retry-delay-ms'] ? { delayMs: int(values['retry-delay-ms'], 'retry-delay-ms') } : {}),
      };
      const created = await cron.create(
        {
          organizationId: values.organization!,
          name: values.name!,
          schedule: values.schedule!,
          timezone: values.tz ?? 'UTC',
          jobType: values.type!,
          payload,
          ...(values.overlap ? { overlap: values.overlap as 'skip' } : {}),
          ...(Object.keys(catchUp).length ? { catchUp: catchUp as never } : {}),
          ...(Object.keys(retry).length ? { retry: retry as never } : {}),
          ...(values['dst-ambiguous'] || values['dst-missing']
            ? {
                dst: {
                  ambiguous: (values['dst-ambiguous'] ?? 'first') as 'first',
                  missing: (values['dst-missing'] ?? 'shift') as 'shift',
                },
              }
            : {}),
          ...(values['timeout-ms'] ? { timeoutMs: int(values['timeout-ms'], 'timeout-ms') } : {}),
          ...(values.paused ? { paused: true } : {}),
          by: actor(values.by),
        },
        { actor: actor(values.by) },
      );
      return print(values.json, created, () => out(`created ${describeJob(created)}`));
    }
    case 'pause':
    case 'resume':
    case 'delete':
    case 'trigger': {
      const { values, positionals } = parseWith(argv, { reason: { type: 'string' } });
      const j = await job(positionals[0], values.organization);
      const by = actor(values.by);
      const meta = { actor: by };
      if (sub === 'pause') {
        if (!values.reason) throw new UsageError('herald cron pause: --reason is required');
        const paused = await cron.pause(j.jobId, values.reason, by, meta);
        return print(values.json, paused, () => out(`paused ${describeJob(paused)}`));
      }
      if (sub === 'resume') {
        const resumed = await cron.resume(j.jobId, by, meta);
        return print(values.json, resumed, () => out(`resumed ${describeJob(resumed)}`));
      }
      if (sub === 'delete') {
        const deleted = await cron.delete(j.jobId, by, meta);
        return print(values.json, deleted, () => out(`deleted ${describeJob(deleted)}`));
      }
      const run = await cron.trigger(j.jobId, by, meta);
      return print(values.json, run, () => out(`triggered ${describeRun(run)}`));
    }
    case 'runs':
    case 'ledger': {
      const { values, positionals } = parseWith(argv, {
        from: { type: 'string' },
        to: { type: 'string' },
        limit: { type: 'string' },
      });
      const j = await job(positionals[0], values.organization);
      const range = {
        ...(values.from ? { from: values.from } : {}),
        ...(values.to ? { to: values.to } : {}),
        limit: int(values.limit, 'limit') ?? 200,
      };
      if (sub === 'runs') {
        const runs = await cron.runsOf(j.jobId, range);
        return print(values.json, runs, () => {
          for (const r of runs) out(describeRun(r));
          out(`${runs.length} run(s) of ${j.name}`);
        });
      }
      const ledger = await cron.ledger(j.jobId, range);
      return print(values.json, ledger, () => {
        for (const e of ledger) {
          out(
            `${e.scheduledFor}  ${e.fate.padEnd(15)} ${e.status.padEnd(18)} ${e.trigger.padEnd(8)} ${e.runId ?? '-'}${e.error ? `  ${e.error}` : e.reason ? `  (${e.reason})` : ''}`,
          );
        }
        const byFate = new Map<string, number>();
        for (const e of ledger) byFate.set(e.fate, (byFate.get(e.fate) ?? 0) + 1);
        out(
          `${ledger.length} occurrence(s) of ${j.name}: ${[...byFate].map(([f, n]) => `${f}=${n}`).join(' ')}`,
        );
      });
    }
    case 'upcoming': {
      const { values, positionals } = parseWith(argv, { count: { type: 'string' } });
      const j = await job(positionals[0], values.organization);
      const upcoming = await cron.upcoming(j.jobId, int(values.count, 'count') ?? 10);
      return print(values.json, upcoming, () => {
        for (const o of upcoming)
          out(
            `${new Date(o.at).toISOString()}  ${o.wall} ${j.timezone}${o.kind === 'regular' ? '' : `  (${o.kind})`}`,
          );
      });
    }
    case 'backfill': {
      const { values, positionals } = parseWith(argv, {
        from: { type: 'string' },
        to: { type: 'string' },
        'dry-run': { type: 'boolean' },
      });
      if (!values.from || !values.to)
        throw new UsageError('herald cron backfill: --from and --to are required');
      const j = await job(positionals[0], values.organization);
      const result = await cron.backfill(j.jobId, {
        from: values.from,
        to: values.to,
        dryRun: values['dry-run'] ?? false,
        by: actor(values.by),
      });
      return print(values.json, result, () => {
        const verb = result.dryRun ? 'would create' : 'created';
        for (const r of result.runs) out(`${verb}  ${r.scheduledFor}  run ${r.runId}`);
        for (const s of result.skipped) out(`skip    ${s}  (already run)`);
        out(
          `backfill ${result.from} … ${result.to}${result.dryRun ? ' (dry run: nothing written)' : ''}: ${result.runs.length} run(s) ${verb}, ${result.skipped.length} skipped as already run`,
        );
      });
    }
    default:
      throw new UsageError(sub ? `unknown cron command '${sub}'` : 'which cron command?');
  }
}

export const cronRoles: Record<string, Role<CronConfig>> = {
  cron: {
    summary:
      'cron jobs: list|show|create|pause|resume|delete|trigger|runs|ledger|upcoming|backfill [--dry-run]',
    usage: USAGE,
    run: cronCommand,
  },
};
