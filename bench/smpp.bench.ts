/**
 * SMPP gateway benchmark (docs/benchmarks.md, "SMS over SMPP: gateway throughput against a bare SMPP
 * client", has results and how to read them).
 *
 *   npm run bench:smpp -- [--recipients 200000] [--window 10] [--template '…'] [--trace]
 *     setup (not timed): a fresh database and fresh topics; a CSV campaign of `recipients` numbers (four
 *       operators) uploaded through SmsCampaignService.createBulk and built by the build sweep, each in a
 *       child process (bench/support/sms-build-child.ts, as `herald worker` builds an upload): QUEUED,
 *       charged. The SMSC simulator, `herald sms-simulator --smpp`, runs as its own process.
 *     (a) herald: `herald sms-gateway` (one transceiver bind, `window`, no TPS cap), `herald relay` and
 *       `herald scanner`, each its own process from source, take the campaign from QUEUED to every part
 *       answered: dispatch → outbox → relay → submit topic → the gateway's inbox transaction → the bind's
 *       claim (`sending`, committed) → submit_sm → answers and receipts recorded → DLR outbox rows.
 *       Then, at the simulator, every recipient must have received each of its parts exactly once (the
 *       run fails loudly otherwise).
 *     (b) raw ceiling: the very same PDUs (same count, parts, encoding, UDH, numbers; built from the parts
 *       the gateway stored) submitted by a bare `smpp` client (bench/support/smpp-raw-child.ts, its own
 *       process, one transceiver bind, the same window) to the same simulator, under another account.
 *     Both are timed at the simulator, from its first submit_sm to its last. Prints `herald submits/s=…`,
 *     `raw submits/s=…` and, last, `ratio=<herald/raw>`; before them the PostgreSQL durability profile
 *     (`show fsync`, `show synchronous_commit`), the load, and CPU per submit of each process.
 *     --trace loads bench/support/smpp-trace.ts into the gateway: its transactions by kind (window claim,
 *     answers, receipts, inbox) with their statements, summed.
 *
 * Needs PostgreSQL and Kafka (npm run bench:smpp starts them, PostgreSQL in its durable profile).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Kafka, logLevel } from 'kafkajs';
import type { ReceivedReport } from '../src/aggregates/campaign/sms/smsc-simulator.js';
import { concatReference, smppParts } from '../src/domain/sms/smpp-message.js';
import type { Database } from '../src/ports/database.js';
import { createTestDatabase, requireEnv, uniqueName } from '../test/support/services.js';
import { type RoleProcess, startRole, stopRoles } from './support/dispatch-roles.js';
import { durabilityProfile } from './support/pg-profile.js';
import type { GatewayTrace } from './support/smpp-trace.js';

const EID = 'ঈদ মোবারক! আপনার জন্য বিশেষ ছাড়: আজই দোকানে আসুন, সব পণ্যে ত্রিশ শতাংশ ছাড়, শুধু আজকের জন্য।';
const { values } = parseArgs({
  options: {
    recipients: { type: 'string', default: '200000' },
    window: { type: 'string', default: '10' },
    template: { type: 'string', default: EID },
    trace: { type: 'boolean', default: false },
    'timeout-s': { type: 'string', default: '3600' },
  },
});
const recipients = Number(values.recipients);
const window = Number(values.window);
const timeoutMs = Number(values['timeout-s']) * 1000;
const HERE = dirname(fileURLToPath(import.meta.url));
const MAIN = join(HERE, '..', 'src', 'main.ts');
const SYSTEM_ID = 'herald';
const RAW_SYSTEM_ID = 'raw';
const PASSWORD = 'secret';

const log = (line: string) => process.stdout.write(`${line}\n`);
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** CPU ms (user + system) of a process, and with `children` of the children it waited for, from /proc. */
function cpuMs(pid: number, children = false): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(f[11]) + Number(f[12]) + (children ? Number(f[13]) + Number(f[14]) : 0);
    return ticks * 10; // USER_HZ = 100
  } catch {
    return 0;
  }
}

/** The PostgreSQL cluster's CPU: the postmaster, its live children, and the children it reaped. */
function postgresCpuMs(postmaster: number | null): number {
  if (postmaster === null) return 0;
  let total = cpuMs(postmaster, true);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === postmaster) total += cpuMs(Number(entry));
    } catch {
      // gone
    }
  }
  return total;
}

/** The postmaster of our PostgreSQL (from its data directory), when we may read it; null otherwise. */
async function postmasterPid(db: Database): Promise<number | null> {
  try {
    const { rows } = await db.query<{ setting: string }>(
      "select setting from pg_settings where name = 'data_directory'",
    );
    return Number(readFileSync(join(rows[0]!.setting, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return null;
  }
}

/** Kafka's pid when it is scripts/services' own broker (its pid file), else null. */
function kafkaPid(): number | null {
  try {
    return Number(readFileSync(join(HERE, '..', '.services', 'kafka', 'kafka.pid'), 'utf8').trim());
  } catch {
    return null;
  }
}

interface Simulator {
  process: ChildProcess;
  port: number;
  /** SIGUSR2: what it received so far, and the timing of the submits since the previous call. */
  received(): Promise<ReceivedReport>;
  stop(): Promise<void>;
}

async function startSimulator(env: Record<string, string>, directory: string): Promise<Simulator> {
  const file = join(directory, 'received.json');
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      MAIN,
      'sms-simulator',
      '--smpp',
      '--port',
      '0',
      '--account',
      `${SYSTEM_ID}:${PASSWORD}`,
      '--account',
      `${RAW_SYSTEM_ID}:${PASSWORD}`,
      '--received-file',
      file,
    ],
    { env: { ...process.env, ...env, HERALD_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const waiters: ((line: string) => void)[] = [];
  const exit = new Promise<number | null>((resolve) => child.on('exit', resolve));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (/"level":(40|50|60)/.test(line) || /"level":"(warn|error|fatal)"/.test(line))
      log(`simulator: ${line}`);
    for (const w of waiters.splice(0)) w(line);
  });
  const nextLine = (pattern: RegExp) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const wait = (line: string) => {
        const match = pattern.exec(line);
        if (match) resolve(match);
        else waiters.push(wait);
      };
      waiters.push(wait);
      exit.then((code) => reject(new Error(`the simulator exited with ${code}`)));
    });
  const port = Number((await nextLine(/SMSC simulator listening on [^:]+:(\d+)/))[1]);
  return {
    process: child,
    port,
    async received() {
      const written = nextLine(/SMSC simulator: received written to/);
      child.kill('SIGUSR2');
      await written;
      return JSON.parse(readFileSync(file, 'utf8')) as ReceivedReport;
    },
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exit;
    },
  };
}

/** Runs a bench child to its end; its last stdout line is its JSON report. */
async function runChild<T>(script: string, env: Record<string, string>): Promise<T & { pid: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(HERE, 'support', script)], {
    env: { ...process.env, ...env, HERALD_LOG_LEVEL: 'silent' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`${script} exited with ${code}`);
  return { ...(JSON.parse(output.trim().split('\n').pop()!) as T), pid: child.pid! };
}

/** Each recipient's expected parts, from what the gateway stored (numbers are unique in the campaign). */
interface Expected {
  submissionId: string;
  recipientId: string;
  content: string;
  encoding: 'GSM7' | 'UCS2';
  sender: string;
  parts: number;
}

async function expectedParts(db: Database, campaignId: string): Promise<Map<string, Expected>> {
  const { rows } = await db.query<{
    msisdn: string;
    submission_id: string;
    recipient_id: string;
    content: string;
    encoding: 'GSM7' | 'UCS2';
    sender: string;
    parts: number;
  }>(
    `select p.msisdn, p.submission_id::text, p.recipient_id::text, s.content, s.encoding, s.sender,
            count(*)::int as parts
       from sms_gateway_part p join sms_gateway_submission s using (submission_id)
      where p.campaign_id = $1
      group by 1, 2, 3, 4, 5, 6`,
    [campaignId],
  );
  const expected = new Map<string, Expected>();
  for (const r of rows) {
    const msisdn = r.msisdn.replace(/^\+/, '');
    if (expected.has(msisdn))
      throw new Error(`${msisdn} is a recipient twice: the check needs unique numbers`);
    expected.set(msisdn, {
      submissionId: r.submission_id,
      recipientId: r.recipient_id,
      content: r.content,
      encoding: r.encoding,
      sender: r.sender,
      parts: r.parts,
    });
  }
  return expected;
}

/**
 * At the simulator: every recipient received each of its parts exactly `times` times (the reference and
 * total as the gateway derives them, the parts' texts in order making up the frozen content), and no
 * other number received anything. Throws, naming the first offenders, otherwise.
 */
function checkReceived(report: ReceivedReport, expected: Map<string, Expected>, times: number): void {
  const problems: string[] = [];
  const problem = (text: string) => {
    if (problems.length < 20) problems.push(text);
    else if (problems.length === 20) problems.push('…');
  };
  for (const [msisdn, e] of expected) {
    const got = report.received[msisdn];
    if (!got) {
      problem(`${msisdn}: nothing received`);
      continue;
    }
    const ref = e.parts > 1 ? concatReference(e.submissionId, e.recipientId) : 1;
    const bySeq = new Map<number, string>();
    for (const [text, r, total, seq, n] of got) {
      if (n !== times) problem(`${msisdn}: part ${seq}/${total} received ${n} times, expected ${times}`);
      if (total !== e.parts || r !== ref)
        problem(`${msisdn}: part ref ${r} total ${total}, expected ${ref}/${e.parts}`);
      if (bySeq.has(seq)) problem(`${msisdn}: part ${seq} received with two different texts`);
      bySeq.set(seq, report.texts[text]!);
    }
    const joined = Array.from({ length: e.parts }, (_, i) => bySeq.get(i + 1) ?? '\u0000').join('');
    if (bySeq.size !== e.parts || joined !== e.content)
      problem(`${msisdn}: the parts received do not make up the message (${bySeq.size} of ${e.parts} parts)`);
  }
  for (const msisdn of Object.keys(report.received)) {
    if (!expected.has(msisdn)) problem(`${msisdn}: not a recipient, yet received something`);
  }
  if (problems.length > 0) {
    throw new Error(
      `the simulator's record is wrong (each part exactly ${times}×):\n  ${problems.join('\n  ')}`,
    );
  }
}

/** The submit_sm parameters the gateway writes for each part (SmscConnection's write), in part order. */
async function rawPdus(db: Database, campaignId: string, file: string): Promise<number> {
  const { rows } = await db.query<{
    msisdn: string;
    submission_id: string;
    recipient_id: string;
    part_no: number;
    content: string;
    encoding: 'GSM7' | 'UCS2';
    sender: string;
  }>(
    `select p.msisdn, p.submission_id::text, p.recipient_id::text, p.part_no, s.content, s.encoding, s.sender
       from sms_gateway_part p join sms_gateway_submission s using (submission_id)
      where p.campaign_id = $1 order by p.id`,
    [campaignId],
  );
  const lines: string[] = [];
  for (const r of rows) {
    const pieces = smppParts(r.content, r.encoding, {
      concatenation: 'udh',
      reference: concatReference(r.submission_id, r.recipient_id),
    });
    const piece = pieces[r.part_no - 1]!;
    const alphanumeric = /[^0-9+]/.test(r.sender);
    lines.push(
      JSON.stringify({
        service_type: '',
        source_addr_ton: alphanumeric ? 5 : 1,
        source_addr_npi: alphanumeric ? 0 : 1,
        source_addr: r.sender,
        dest_addr_ton: 1,
        dest_addr_npi: 1,
        destination_addr: r.msisdn.replace(/^\+/, ''),
        esm_class: piece.udhIndicator ? 0x40 : 0,
        registered_delivery: 1,
        data_coding: piece.dataCoding,
        short_message: Buffer.from(piece.shortMessage).toString('hex'),
      }),
    );
  }
  writeFileSync(file, `${lines.join('\n')}\n`);
  return lines.length;
}

const rate = (n: number, ms: number) => Math.round((n / ms) * 1000);

function printTrace(trace: GatewayTrace, submits: number): void {
  const labels: Record<keyof GatewayTrace, string> = {
    claim: "window claim: the parts marked 'sending' (committed before any PDU is written)",
    responses: 'answers recorded (accepted / queued again / failed / unconfirmed) + their reports',
    receipts: 'receipts recorded, matched, recipients reported (outbox rows)',
    consumer: 'consumer: inbox transaction (fence, submission and parts stored)',
    sweeps: 'unconfirmed sweep and late-receipt matching',
    other: 'other',
  };
  log(
    `trace: the gateway's transactions (BEGIN sent → COMMIT answered, in the gateway process), ${submits} submits:`,
  );
  for (const [kind, t] of Object.entries(trace) as [keyof GatewayTrace, GatewayTrace['claim']][]) {
    if (t.transactions === 0) continue;
    const rowsPer = t.rows > 0 ? `, ${(t.rows / t.transactions).toFixed(1)} rows each` : '';
    log(
      `  ${labels[kind]}: ${t.transactions} transactions${rowsPer}, mean ${(t.totalMs / t.transactions).toFixed(2)} ms, max ${t.maxMs.toFixed(0)} ms, total ${(t.totalMs / 1000).toFixed(1)} s (${((t.totalMs * 1000) / submits).toFixed(0)} µs per submit)`,
    );
    const statements = Object.entries(t.statements).sort((a, b) => b[1].totalMs - a[1].totalMs);
    for (const [name, s] of statements) {
      log(`      ${name}: ${s.count} × ${(s.totalMs / s.count).toFixed(2)} ms`);
    }
  }
}

async function main() {
  const started = Date.now();
  const cpu = cpus();
  log(
    `smpp: machine ${cpu.length} cpus (${cpu[0]?.model.trim()}), ${Math.round(totalmem() / 2 ** 30)} GB, node ${process.version}; load avg ${load()}`,
  );
  const database = await createTestDatabase();
  const db = database.db;
  const profile = await durabilityProfile(db);
  log(`smpp: ${profile.line}`);
  const brokers = requireEnv('KAFKA_BROKERS');
  const kafka = new Kafka({
    clientId: 'herald-bench-smpp',
    brokers: brokers.split(','),
    logLevel: logLevel.ERROR,
  });
  const admin = kafka.admin();
  await admin.connect();
  const submitTopic = uniqueName('bench_smpp_submit');
  const dlrTopic = uniqueName('bench_smpp_dlr');
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic: submitTopic, numPartitions: 4 },
      { topic: dlrTopic, numPartitions: 4 },
    ],
  });
  const directory = mkdtempSync(join(tmpdir(), 'herald-bench-smpp-'));
  const env: Record<string, string> = {
    DATABASE_URL: database.url,
    HERALD_SCHEMA: database.schema,
    KAFKA_BROKERS: brokers,
    AMQP_URL: '',
    HERALD_SMS_SUBMIT_TOPIC: submitTopic,
    HERALD_SMS_DLR_TOPIC: dlrTopic,
    HERALD_SMS_PROMOTIONAL_WINDOW: '00:00:00-23:59:59',
    HERALD_SMS_BULK_MAX_RECIPIENTS: String(Math.max(recipients, 1)),
    HERALD_SMS_SIMULATOR_OUTCOMES: 'DELIVERED=100',
  };
  let simulator: Simulator | undefined;
  let roles: RoleProcess[] = [];
  try {
    // Setup: the CSV campaign, uploaded and built in child processes (as `herald worker` builds it).
    const setupStarted = performance.now();
    const upload = await runChild<{ campaignId: string; sizeBytes: number }>('sms-build-child.ts', {
      ...env,
      BENCH_ROWS: String(recipients),
      BENCH_PHASE: 'upload',
      BENCH_TEMPLATE: values.template,
    });
    const build = await runChild<{ outcome: { status: string; accepted: number } }>('sms-build-child.ts', {
      ...env,
      BENCH_ROWS: String(recipients),
      BENCH_PHASE: 'build',
    });
    if (build.outcome?.status !== 'QUEUED' || build.outcome.accepted !== recipients)
      throw new Error(`the build ended ${JSON.stringify(build.outcome)}`);
    const campaignId = upload.campaignId;
    const { rows: plan } = await db.query<{ parts: number; encoding: string; segments: number }>(
      `select sum(segments)::int as parts, min(encoding) as encoding, max(segments)::int as segments
         from campaign_recipient where campaign_id = $1`,
      [campaignId],
    );
    const totalParts = plan[0]!.parts;
    await db.query('vacuum analyze campaign_recipient');
    log(
      `setup: ${recipients} recipients (CSV of ${upload.sizeBytes} bytes, four operators) uploaded and built in ${Math.round(performance.now() - setupStarted)} ms: QUEUED, ${totalParts} parts (${plan[0]!.encoding}, ${plan[0]!.segments} per message)`,
    );

    simulator = await startSimulator(env, directory);
    const gatewayEnv = {
      ...env,
      HERALD_SMS_GATEWAY_SMSCS: JSON.stringify([
        {
          name: 'sim',
          host: '127.0.0.1',
          port: simulator.port,
          systemId: SYSTEM_ID,
          channels: ['*'],
          binds: { transceivers: 1 },
          window,
          // The schema's maximum: no cap at these rates (a pacer slot every 10 µs).
          tpsPerBind: 100_000,
        },
      ]),
      HERALD_SMS_GATEWAY_PASSWORDS: JSON.stringify({ sim: PASSWORD }),
    };
    const roleEnvironment = {
      databaseUrl: database.url,
      schema: database.schema,
      settings: gatewayEnv,
      ...(values.trace
        ? { traceDirectory: directory, tracePreload: join(HERE, 'support', 'smpp-trace.ts') }
        : {}),
    };
    const gateway = startRole('sms-gateway', 1, roleEnvironment);
    roles.push(gateway);
    await gateway.ready;
    await simulator.received(); // a new period: the submits of this run only
    const pgPid = await postmasterPid(db);
    const kPid = kafkaPid();
    const cpuBefore = {
      postgres: postgresCpuMs(pgPid),
      kafka: kPid ? cpuMs(kPid) : 0,
      simulator: cpuMs(simulator.process.pid!),
    };
    const relay = startRole('relay', 1, { ...roleEnvironment, traceDirectory: undefined });
    const scanner = startRole('scanner', 1, { ...roleEnvironment, traceDirectory: undefined });
    roles.push(relay, scanner);
    await Promise.all([relay.ready, scanner.ready]);
    const rolesStarted = performance.now();
    const roleCpuBefore = Object.fromEntries(roles.map((r) => [r.role, r.cpuMs()]));
    log(`herald: gateway, relay and scanner started (each its own process); load avg ${load()}`);

    // Until every part is answered: all recipients dispatched, every chunk stored by the gateway, nothing
    // queued or sending (each of these reads a row or a partial index: cheap beside the run).
    let dispatchedMs = 0;
    for (;;) {
      const { rows } = await db.query<{ unsent: number; chunks: number; stored: number; open: number }>(
        `select c.sms_unsent as unsent, coalesce((c.sms->>'submissions')::int, 0) as chunks,
                (select count(*)::int from sms_gateway_submission) as stored,
                (select count(*)::int from sms_gateway_part where state in ('queued', 'sending')) as open
           from campaign c where c.id = $1`,
        [campaignId],
      );
      const s = rows[0]!;
      if (!dispatchedMs && s.unsent === 0 && s.chunks > 0) dispatchedMs = performance.now() - rolesStarted;
      if (s.unsent === 0 && s.chunks > 0 && s.stored === s.chunks && s.open === 0) break;
      if (performance.now() - rolesStarted > timeoutMs)
        throw new Error(`timed out: ${JSON.stringify(s)}; ${roles.flatMap((r) => r.problems).join('\n')}`);
      for (const role of roles) {
        if (role.problems.some((p) => p.includes('"level":"error"') || p.includes('"level":50')))
          throw new Error(`${role.name} logged an error:\n${role.problems.join('\n')}`);
      }
      await sleep(250);
    }
    const answeredMs = performance.now() - rolesStarted;
    const heraldLoad = load();
    const herald = await simulator.received();
    const cpuAfter = {
      postgres: postgresCpuMs(pgPid),
      kafka: kPid ? cpuMs(kPid) : 0,
      simulator: cpuMs(simulator.process.pid!),
    };
    const roleCpu = Object.fromEntries(roles.map((r) => [r.role, r.cpuMs() - roleCpuBefore[r.role]!]));
    const { rows: states } = await db.query<{ state: string; count: number }>(
      'select state, count(*)::int as count from sms_gateway_part where campaign_id = $1 group by 1',
      [campaignId],
    );
    const byState = Object.fromEntries(states.map((s) => [s.state, s.count]));
    if (byState.accepted !== totalParts || states.length !== 1)
      throw new Error(`parts at the end: ${JSON.stringify(byState)}, expected ${totalParts} accepted`);
    if (herald.period.submits !== totalParts)
      throw new Error(`the simulator took ${herald.period.submits} submit_sm, expected ${totalParts}`);
    const expected = await expectedParts(db, campaignId);
    if (expected.size !== recipients)
      throw new Error(`${expected.size} recipients with parts, expected ${recipients}`);
    checkReceived(herald, expected, 1);
    const heraldMs = herald.period.lastSubmitAt! - herald.period.firstSubmitAt!;
    log(
      `herald: ${totalParts} submit_sm in ${Math.round(heraldMs)} ms at the simulator (first to last); all dispatched ${Math.round(dispatchedMs)} ms and all answered ${Math.round(answeredMs)} ms after the roles started; load avg ${heraldLoad}`,
    );
    log(
      `herald: checked at the simulator: each of the ${recipients} recipients received each of its parts exactly once (${totalParts} parts, none elsewhere, none resubmitted)`,
    );
    const perSubmit = (ms: number) => `${Math.round((ms * 1000) / totalParts)} µs`;
    log(
      `herald: cpu per submit (roles' start to all answered): gateway ${perSubmit(roleCpu['sms-gateway']!)}, scanner ${perSubmit(roleCpu.scanner!)}, relay ${perSubmit(roleCpu.relay!)}, simulator ${perSubmit(cpuAfter.simulator - cpuBefore.simulator)}, PostgreSQL ${pgPid ? perSubmit(cpuAfter.postgres - cpuBefore.postgres) : 'n/a'}, Kafka ${kPid ? perSubmit(cpuAfter.kafka - cpuBefore.kafka) : 'n/a'}`,
    );

    // Receipts recorded and reported, then the roles stopped (SIGTERM: the gateway unbinds cleanly).
    const { rows: left } = await db.query<{ waiting: number }>(
      `select count(*)::int as waiting from sms_gateway_part where campaign_id = $1 and receipt_status is null`,
      [campaignId],
    );
    const receiptsStarted = performance.now();
    for (let waiting = left[0]!.waiting; waiting > 0; ) {
      if (performance.now() - receiptsStarted > 120_000)
        throw new Error(`${waiting} parts still without a receipt`);
      await sleep(500);
      const { rows } = await db.query<{ waiting: number }>(
        `select count(*)::int as waiting from sms_gateway_part where campaign_id = $1 and receipt_status is null`,
        [campaignId],
      );
      waiting = rows[0]!.waiting;
    }
    await stopRoles(roles);
    roles = [];
    if (values.trace) {
      printTrace(JSON.parse(readFileSync(join(directory, 'bench-sms-gateway-1.json'), 'utf8')), totalParts);
    }

    // (b) raw ceiling: the same PDUs from a bare smpp client.
    const pduFile = join(directory, 'pdus.jsonl');
    const pdus = await rawPdus(db, campaignId, pduFile);
    const rawSimCpu = cpuMs(simulator.process.pid!);
    const raw = await runChild<{ submits: number; accepted: number; receipts: number; elapsedMs: number }>(
      'smpp-raw-child.ts',
      {
        BENCH_SMPP_PORT: String(simulator.port),
        BENCH_SYSTEM_ID: RAW_SYSTEM_ID,
        BENCH_PASSWORD: PASSWORD,
        BENCH_PDUS: pduFile,
        BENCH_WINDOW: String(window),
      },
    );
    const rawLoad = load();
    const rawReport = await simulator.received();
    const rawSimCpuMs = cpuMs(simulator.process.pid!) - rawSimCpu;
    if (raw.accepted !== pdus || rawReport.period.submits !== pdus)
      throw new Error(
        `raw: ${raw.accepted} accepted, ${rawReport.period.submits} at the simulator, expected ${pdus}`,
      );
    checkReceived(rawReport, expected, 2);
    const rawMs = rawReport.period.lastSubmitAt! - rawReport.period.firstSubmitAt!;
    log(
      `raw: the same ${pdus} submit_sm in ${Math.round(rawMs)} ms at the simulator (${Math.round(raw.elapsedMs)} ms in the client, first write to last response), ${raw.receipts} receipts answered meanwhile; simulator cpu ${perSubmit(rawSimCpuMs)} per submit; load avg ${rawLoad}`,
    );
    const heraldRate = rate(totalParts, heraldMs);
    const rawRate = rate(pdus, rawMs);
    log(`smpp: ${profile.line}; ${((Date.now() - started) / 1000).toFixed(0)} s in all`);
    log(`herald submits/s=${heraldRate}`);
    log(`raw submits/s=${rawRate}`);
    log(`ratio=${(heraldRate / rawRate).toFixed(2)}`);
  } finally {
    await stopRoles(roles).catch((error: unknown) => log(`stopping roles: ${String(error)}`));
    await simulator?.stop();
    await admin.deleteTopics({ topics: [submitTopic, dlrTopic] }).catch(() => {});
    await admin.disconnect();
    await database.drop();
    rmSync(directory, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`bench:smpp failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
