/**
 * Benchmark of the product (`npm run bench:e2e`): pgward as users run it, audit included, against
 * direct PostgreSQL and PgBouncer in the same rounds. A measurement, not a test: figures below
 * target print BELOW; only errors (and a lost or doubled audit entry) exit non-zero.
 *
 * Upstream is the machine's PostgreSQL (127.0.0.1:5432) with a fresh `pgbench -i -s 10` database;
 * PgBouncer (transaction mode, pool 10) fronts it. Each deployment (e2e-deployments.ts) is started,
 * provisioned with an open and a realistic credential, warmed up, then measured for several rounds:
 * `pgbench -S` in each protocol mode and client count against direct, PgBouncer, and pgward under
 * each credential. At the end of each deployment's rounds the bench proves nothing was lost: the
 * project's audit entries (read model and event store) equal the statements run, how long after
 * the load they were all there, and that the chain verifies.
 *
 * The cache modes (proxy-pgbench.ts cacheScript()) repeat -S's statement over 100 accounts
 * (`cache-hits`) or draw 9 in 10 of its keys from them (`cache-mixed`), on the simple protocol: the
 * open credential's result cache answers them; the realistic one's row cap bypasses it.
 *
 * After the rounds, one run of PGWARD_BENCH_SUSTAINED_SECONDS (30; 0 for none) at c=10 through the
 * open credential, longer than any round's: a trail that cannot keep up with a load that does not
 * stop shows there (its backlog grows, and once the bus is full decisions become gap markers),
 * where short runs with direct's between them hide it. Its statements are counted with the rest, and
 * the trail must hold no gap marker.
 *
 * Settings (for quick runs): PGWARD_BENCH_SECONDS (per run, 5), PGWARD_BENCH_WARMUP_SECONDS (3),
 * PGWARD_BENCH_ROUNDS (3), PGWARD_BENCH_MODES (simple,extended,prepared,cache-hits,cache-mixed), PGWARD_BENCH_CLIENTS
 * (1,10,50), PGWARD_BENCH_DEPLOYMENTS (serve,split), NATS_URL (nats://127.0.0.1:4222), PGWARD_BENCH_NODE_OPTIONS
 * (node options of every pgward process, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` for a profile of each).
 */
import { join } from 'node:path';
import pg from 'pg';
import { auditEntryCount, verifyAudit, type Login } from '../support/pgward-process.js';
import { benchSettings, describeOutcome, eachRun, loadAverage, median, PGBOUNCER, prepareWorkspace, runBench, number, ratio, Results, subset, table, verdict, wholeNumber, type Pick } from './bench-kit.js';
import { CpuMeter } from './e2e-cpu.js';
import { backendsOf, benchUpstream, DEPLOYMENTS, startServe, startSplit, type Credential, type Deployment, type DeploymentName } from './e2e-deployments.js';
import { writeFile } from 'node:fs/promises';
import { cacheScript, isCacheMode, runArgs, select, type Endpoint, type Mode, type Outcome, type Run } from './proxy-pgbench.js';
import { startPgBouncer, Teardown, type Cluster } from './proxy-servers.js';

const ALL_MODES: readonly Mode[] = ['simple', 'extended', 'prepared', 'cache-hits', 'cache-mixed'];
const CACHE_MODES: readonly Mode[] = ['cache-hits', 'cache-mixed'];
const TARGETS = ['direct', 'PgBouncer', 'open', 'realistic'] as const;
type Target = (typeof TARGETS)[number];
const PGWARD_TARGETS: readonly Credential[] = ['open', 'realistic'];
/**
 * Direct again, offered the open credential's throughput of the same round (`pgbench -R`): an
 * upstream backend woken for each of fewer statements costs more a statement than one kept busy
 * (on session 22's machine 227 µs at 2,700 tps against 130 at full speed), so this row, not
 * direct's, is what pgward's upstream PG row is to be read against. Only its CPU is kept.
 */
const AT_OPENS_RATE = "direct at open's rate";
type CpuRow = Target | typeof AT_OPENS_RATE;
const SCALE = 10;
/**
 * Statements pgbench sends before its transactions, on a connection of its own: the branch count
 * that gives it the scale and the query on pgbench_accounts' partitioning. pgward audits them like
 * any other statement.
 */
const PGBENCH_SETUP_STATEMENTS = 2;

const TARGET_OPEN_VS_DIRECT = 0.25;
const TARGET_REALISTIC_VS_DIRECT = 0.2;
const TARGET_SPLIT_VS_DIRECT = 0.3;
const TARGET_ADDED_P50_US = 150;
const TARGET_AUDIT_LAG_S = 5;
const TARGET_STEADY = 0.9;
/** Result-cache hits through pgward (open credential, simple protocol) against the same statements direct. */
const TARGET_CACHE_HITS_VS_DIRECT = 1.5;

const { seconds: SECONDS, warmupSeconds: WARMUP_SECONDS, rounds: ROUNDS, modes: MODES, clients: CLIENTS } = benchSettings(ALL_MODES);
const SUSTAINED_SECONDS = wholeNumber('PGWARD_BENCH_SUSTAINED_SECONDS', 'seconds', 0, 30);
const DEPLOYMENT_NAMES = subset('PGWARD_BENCH_DEPLOYMENTS', DEPLOYMENTS);
const NATS_URL = process.env.NATS_URL || 'nats://127.0.0.1:4222';
/** The script file of each cache mode, written at start. */
const scripts = new Map<Mode, string>();

/** How long the bench waits for the audit trail to hold every statement before it reports a loss. */
const AUDIT_WAIT_MS = 300_000;

function log(line: string): void {
  console.log(`[bench:e2e] ${line}`);
}

/** CPU µs per transaction of each process group, by (mode, clients, credential), one value per round. */
class CpuFigures {
  private readonly cells = new Map<string, Record<string, number>[]>();

  add(mode: Mode, clients: number, target: CpuRow, perTransaction: Record<string, number>): void {
    const key = `${mode}/${clients}/${target}`;
    this.cells.set(key, [...(this.cells.get(key) ?? []), perTransaction]);
  }

  median(mode: Mode, clients: number, target: CpuRow, group: string): number {
    return median((this.cells.get(`${mode}/${clients}/${target}`) ?? []).map((round) => round[group]).filter((v): v is number => v !== undefined));
  }
}

interface Audited {
  /** Statements run through pgward: exactly, or at least this many when a run failed. */
  readonly statements: number;
  readonly exact: boolean;
  readonly entries: number;
  readonly events: number;
  readonly lagSeconds: number;
  readonly chainOk: boolean;
  readonly gapMarkers: number;
  /** The sustained run, and direct's median at its mode and c=10. */
  readonly sustained?: { readonly mode: Mode; readonly outcome: Outcome; readonly directTps: number };
}

function printReport(deployment: DeploymentName, results: Results<Target>, cpu: CpuFigures, groups: readonly string[], audited: Audited): void {
  const tps = (target: Target) => (mode: Mode, clients: number) => results.cell(mode, clients, [target], (o) => o.tps, number.format);
  const share = (a: Target, b: Target) => (mode: Mode, clients: number) => results.cell(mode, clients, [a, b], (x, y) => x.tps / y.tps, (n) => `${ratio.format(n)}×`);
  const columns = [tps('direct'), tps('PgBouncer'), tps('open'), share('open', 'direct'), share('open', 'PgBouncer'), tps('realistic'), share('realistic', 'direct'), share('realistic', 'PgBouncer')];
  const rows = MODES.flatMap((mode) => CLIENTS.map((clients) => [mode, String(clients), ...columns.map((cell) => cell(mode, clients))]));
  console.log(`\n== ${deployment} ==\n\nThroughput (pgbench -S): median TPS over ${ROUNDS} rounds of ${SECONDS} s; ratios are medians of the per-round ratios\n`);
  console.log(table(['mode', 'c', 'direct', 'PgBouncer', 'open', 'open/direct', 'open/PgBouncer', 'realistic', 'realistic/direct', 'realistic/PgBouncer'], rows));

  if (CLIENTS.includes(1)) {
    const at = (target: Target, key: 'p50' | 'p99') => (mode: Mode) => results.cell(mode, 1, [target], (o) => o.latency![key], number.format);
    const added = (target: Target) => (mode: Mode) => results.cell(mode, 1, [target, 'direct'], (w, d) => w.latency!.p50 - d.latency!.p50, number.format);
    const latency = MODES.map((mode) => [mode, '1', ...[at('direct', 'p50'), at('direct', 'p99'), at('PgBouncer', 'p50'), at('open', 'p50'), at('open', 'p99'), added('open'), at('realistic', 'p50'), at('realistic', 'p99'), added('realistic')].map((cell) => cell(mode))]);
    console.log(`\nLatency at c=1 (µs, pgbench --log): medians over the rounds; added = p50 − direct p50 of the same round\n`);
    console.log(table(['mode', 'c', 'direct p50', 'direct p99', 'PgBouncer p50', 'open p50', 'open p99', 'open added p50', 'realistic p50', 'realistic p99', 'realistic added p50'], latency));
  }

  const cpuRows = MODES.flatMap((mode) =>
    CLIENTS.flatMap((clients) =>
      ([...PGWARD_TARGETS, 'PgBouncer', 'direct', AT_OPENS_RATE] as const).flatMap((target) => {
        const cells = [...groups, 'PgBouncer'].map((group) => cpu.median(mode, clients, target, group));
        // A target that cannot serve the mode (PgBouncer before 1.21 and prepared statements) has no row.
        if (cells.every((v) => Number.isNaN(v))) return [];
        const total = cells.filter((v) => !Number.isNaN(v)).reduce((a, b) => a + b, 0);
        const bench = cpu.median(mode, clients, target, 'bench');
        return [[`${mode} ${target}`, String(clients), ...cells.map((v) => (Number.isNaN(v) ? '' : number.format(v))), number.format(total), Number.isNaN(bench) ? '' : number.format(bench)]];
      }),
    ),
  );
  console.log(`\nCPU per transaction (µs, /proc/<pid>/stat; medians over the rounds; upstream PG = the backends of the bench database, for PgBouncer's and direct's rows too; ${AT_OPENS_RATE} = direct offered open's throughput of the round (pgbench -R), what pgward's upstream PG compares with; bench = this process, not in the total)\n`);
  console.log(table(['run', 'c', ...groups, 'PgBouncer', 'total', 'bench'], cpuRows));

  const failures = results.failures(MODES, CLIENTS, TARGETS);
  if (failures.length > 0) console.log(`\nFailed runs (shown as fail above):\n${failures.join('\n')}`);

  console.log('\nNothing lost:');
  const counted = audited.exact ? '' : 'at least (a run through pgward failed, so pgbench did not say how many it ran) ';
  console.log(`  statements run through pgward: ${counted}${number.format(audited.statements)} (pgbench's transactions and its ${PGBENCH_SETUP_STATEMENTS} set-up queries per -S run, warm-ups included, and the bench's own probes)`);
  const equal = audited.exact ? audited.entries === audited.statements && audited.events === audited.statements : audited.entries >= audited.statements && audited.events === audited.entries;
  console.log(`  audit entries: ${number.format(audited.entries)} in the read model, ${number.format(audited.events)} in the event store ${equal ? 'PASS' : 'MISMATCH'}`);
  console.log(`  audit lag after the load: ${audited.lagSeconds.toFixed(1)} s; chain verifies: ${audited.chainOk ? 'yes' : 'NO'}; gap markers: ${number.format(audited.gapMarkers)} ${audited.gapMarkers === 0 ? 'PASS' : 'LOST DECISIONS'}`);
  const { sustained } = audited;
  if (sustained) {
    const tps = sustained.outcome.ok ? sustained.outcome.tps : Number.NaN;
    console.log(`  sustained: ${SUSTAINED_SECONDS} s of ${sustained.mode} c=10 open, the last load: ${describeOutcome(sustained.outcome)}${Number.isNaN(sustained.directTps) ? '' : `, ${ratio.format(tps / sustained.directTps)}× direct's median`}`);
  }

  console.log('\nTargets:');
  const vs = (target: Target, mode: Mode, clients: number) => results.median(mode, clients, [target, 'direct'], (w, d) => w.tps / d.tps);
  if (MODES.includes('extended') && CLIENTS.includes(10)) {
    const open = vs('open', 'extended', 10);
    const realistic = vs('realistic', 'extended', 10);
    const minimum = deployment === 'split' ? TARGET_SPLIT_VS_DIRECT : TARGET_OPEN_VS_DIRECT;
    console.log(`  open/direct at c=10 extended >= ${ratio.format(minimum)}×: ${ratio.format(open)}× ${verdict(open >= minimum)}`);
    if (deployment === 'serve') console.log(`  realistic/direct at c=10 extended >= ${ratio.format(TARGET_REALISTIC_VS_DIRECT)}×: ${ratio.format(realistic)}× ${verdict(realistic >= TARGET_REALISTIC_VS_DIRECT)}`);
    const rounds = results.perRound('extended', 10, ['open'], (o) => o.tps);
    if (rounds.length > 1) console.log(`  steady: last round / first round at c=10 extended open >= ${TARGET_STEADY}: ${ratio.format(rounds.at(-1)! / rounds[0]!)} ${verdict(rounds.at(-1)! / rounds[0]! >= TARGET_STEADY)}`);
  }
  if (CLIENTS.includes(10)) {
    if (MODES.includes('cache-hits')) {
      const hits = vs('open', 'cache-hits', 10);
      console.log(`  cache hits: open/direct at c=10 >= ${ratio.format(TARGET_CACHE_HITS_VS_DIRECT)}×: ${ratio.format(hits)}× ${verdict(hits >= TARGET_CACHE_HITS_VS_DIRECT)}`);
    }
    if (MODES.includes('cache-mixed')) console.log(`  cache mixed (about 90 % hits): open/direct at c=10: ${ratio.format(vs('open', 'cache-mixed', 10))}×`);
  }
  if (CLIENTS.includes(1)) {
    const added: Pick = (w, d) => w.latency!.p50 - d.latency!.p50;
    const worst = Math.max(...MODES.filter((mode) => !CACHE_MODES.includes(mode)).map((mode) => results.median(mode, 1, ['open', 'direct'], added)));
    console.log(`  added p50 at c=1 (open, worst mode) <= ${TARGET_ADDED_P50_US} µs: ${number.format(worst)} µs ${verdict(worst <= TARGET_ADDED_P50_US)}`);
  }
  console.log(`  every statement audited within ${TARGET_AUDIT_LAG_S} s of the load's end, chain verified: ${verdict(equal && audited.gapMarkers === 0 && audited.lagSeconds <= TARGET_AUDIT_LAG_S && audited.chainOk)}`);
}

/** One statement through pgward under `login`, the bench's own probe that the credential works. */
async function probe(port: number, login: Login): Promise<void> {
  const client = new pg.Client({ host: '127.0.0.1', port, ...login, ssl: false });
  await client.connect();
  try {
    await client.query('select count(*) from public.pgbench_branches');
  } finally {
    await client.end();
  }
}

/** Connections a run needs beyond its clients: pgbench's own, the proxy's pool, ingest's and the projections' appends. */
const CONNECTION_MARGIN = 15;
const HEADROOM_WAIT_MS = 60_000;

/**
 * Waits (up to a minute) until the machine's PostgreSQL has room for a run of `clients`: the
 * machine is shared, and a run refused for connections would leave its statement count unknown.
 */
async function headroom(admin: pg.Client, clients: number): Promise<void> {
  const deadline = Date.now() + HEADROOM_WAIT_MS;
  for (;;) {
    const { rows } = await admin.query<{ free: number }>("select current_setting('max_connections')::int - count(*)::int as free from pg_stat_activity");
    if (rows[0]!.free >= clients + CONNECTION_MARGIN || Date.now() > deadline) return;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}

/** `audit verify --from-events`, tried again (up to three times) when the shared PostgreSQL refused it. */
async function verifyWithRoom(admin: pg.Client, projectId: string, env: NodeJS.ProcessEnv): Promise<ReturnType<typeof verifyAudit>> {
  for (let attempt = 1; ; attempt++) {
    await headroom(admin, 10);
    try {
      return verifyAudit(projectId, env);
    } catch (error) {
      if (attempt === 3) throw error;
      log(`${(error as Error).message.trim()}; trying again`);
    }
  }
}

const scriptOf = (mode: Mode): { script?: string } => {
  const script = scripts.get(mode);
  return script ? { script } : {};
};

async function measure(deployment: Deployment, admin: pg.Client, direct: Endpoint, bouncer: { port: number; pid: number; servesPrepared: boolean }, pgbench: string, logs: string, signal: AbortSignal): Promise<void> {
  const endpoints: Record<Target, Endpoint> = {
    direct,
    PgBouncer: { ...direct, port: bouncer.port },
    open: { port: deployment.proxyPort, ...deployment.logins.open },
    realistic: { port: deployment.proxyPort, ...deployment.logins.realistic },
  };
  let statements = 0;
  /** False once a run through pgward failed: pgbench does not say how many statements it ran then. */
  let exact = true;
  for (const credential of PGWARD_TARGETS) {
    await probe(deployment.proxyPort, deployment.logins[credential]);
    statements += 1;
  }
  const serves = (target: Target, mode: Mode): boolean => target !== 'PgBouncer' || mode !== 'prepared' || bouncer.servesPrepared;
  const count = (target: Target, mode: Mode, outcome: Outcome): void => {
    if (target !== 'open' && target !== 'realistic') return;
    if (outcome.transactions === undefined) exact = false;
    // A script of its own (-f) needs no scale: pgbench sends no set-up queries then.
    else statements += (isCacheMode(mode) ? 0 : PGBENCH_SETUP_STATEMENTS) + outcome.transactions;
  };

  if (WARMUP_SECONDS > 0) {
    log(`warm-up: ${WARMUP_SECONDS} s of each mode at c=10 per target`);
    for (const mode of MODES) {
      for (const target of TARGETS) {
        if (!serves(target, mode)) continue;
        await headroom(admin, 10);
        const outcome = await select(pgbench, endpoints[target], { mode, clients: 10, seconds: WARMUP_SECONDS, ...scriptOf(mode) }, signal);
        count(target, mode, outcome);
        if (!outcome.ok) log(`warm-up ${mode} ${target}: ${describeOutcome(outcome)}`);
      }
    }
  }

  const results = new Results<Target>();
  const cpu = new CpuFigures();
  const groups = Object.keys(deployment.processes);
  const runs = ROUNDS * MODES.length * CLIENTS.length * TARGETS.length;
  log(`${runs} runs of ${SECONDS} s: pgbench ${runArgs({ mode: 'extended', clients: 10, seconds: SECONDS }).join(' ')} (and the other modes and client counts), --log at c=1; after each open run at c>1, direct at its rate (-R)`);
  await eachRun({ rounds: ROUNDS, modes: MODES, clients: CLIENTS, targets: TARGETS, serves }, results, signal, async ({ mode, clients, target, round, progress }) => {
    const logPrefix = clients === 1 ? join(logs, `${deployment.name}-${target}-${mode}-${round}`) : undefined;
    // The bench's own process too: it samples the others every 250 ms while they run.
    const upstreamBackends = { 'upstream PG': backendsOf(admin, direct.database), bench: async () => [process.pid] };
    /** One measured run: its outcome, the CPU a transaction of `row`'s processes recorded, and the line that says so. */
    const metered = async (row: CpuRow, endpoint: Endpoint, run: Omit<Run, 'mode' | 'clients' | 'seconds'>): Promise<{ outcome: Outcome; line: string }> => {
      const meter = new CpuMeter(row === 'open' || row === 'realistic' ? { ...deployment.processes, bench: upstreamBackends.bench } : row === 'PgBouncer' ? { PgBouncer: async () => [bouncer.pid], ...upstreamBackends } : upstreamBackends);
      await headroom(admin, clients);
      await meter.begin();
      const outcome = await select(pgbench, endpoint, { mode, clients, seconds: SECONDS, ...scriptOf(mode), ...run }, signal).finally(() => meter.stop());
      const used = await meter.end();
      if (!outcome.ok || outcome.transactions === 0) return { outcome, line: '' };
      const perTransaction = Object.fromEntries(Object.entries(used).map(([group, us]) => [group, us / outcome.transactions]));
      cpu.add(mode, clients, row, perTransaction);
      return { outcome, line: `; CPU µs/txn ${Object.entries(perTransaction).map(([group, us]) => `${group} ${number.format(us)}`).join(', ')}` };
    };
    const { outcome, line } = await metered(target, endpoints[target], logPrefix ? { logPrefix } : {});
    count(target, mode, outcome);
    log(`${progress} ${deployment.name} ${mode} c=${clients} ${target}: ${describeOutcome(outcome)}${line}`);
    if (target === 'open' && clients > 1 && outcome.ok) {
      const paced = await metered(AT_OPENS_RATE, endpoints.direct, { rate: Math.max(1, Math.round(outcome.tps)) });
      log(`${progress} ${deployment.name} ${mode} c=${clients} ${AT_OPENS_RATE}: ${describeOutcome(paced.outcome)}${paced.line}`);
    }
    return outcome;
  });

  let sustained: Audited['sustained'];
  if (SUSTAINED_SECONDS > 0) {
    const mode = MODES.includes('extended') ? 'extended' : MODES[0]!;
    await headroom(admin, 10);
    const outcome = await select(pgbench, endpoints.open, { mode, clients: 10, seconds: SUSTAINED_SECONDS, ...scriptOf(mode) }, signal);
    count('open', mode, outcome);
    sustained = { mode, outcome, directTps: CLIENTS.includes(10) ? results.median(mode, 10, ['direct'], (d) => d.tps) : Number.NaN };
    log(`sustained: ${SUSTAINED_SECONDS} s of ${mode} c=10 open: ${describeOutcome(outcome)}`);
  }

  const loadEnded = Date.now();
  const projectId = deployment.provisioned.projectId;
  let entries = await auditEntryCount(deployment.stateUrl, projectId);
  while (entries < statements && Date.now() - loadEnded < AUDIT_WAIT_MS) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    entries = await auditEntryCount(deployment.stateUrl, projectId);
  }
  const lagSeconds = (Date.now() - loadEnded) / 1000;
  // Anything arriving late would show as more entries than statements.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const tally = await verifyWithRoom(admin, projectId, deployment.env);
  log(`audit: ${tally.entries} entries verified (${tally.events} from the events) for ${statements} statements; load average ${loadAverage()}`);
  // Decisions the trail lost (docs/audit-verification.md).
  const gapMarkers = await auditEntryCount(deployment.stateUrl, projectId, true);
  const audited: Audited = { statements, exact, entries: tally.entries, events: tally.events, lagSeconds, chainOk: tally.ok, gapMarkers, ...(sustained ? { sustained } : {}) };
  printReport(deployment.name, results, cpu, groups, audited);
  const matches = exact ? tally.entries === statements && tally.events === statements : tally.entries >= statements && tally.events === tally.entries;
  if (!matches || !tally.ok || gapMarkers > 0) throw new Error(`the audit trail does not match the statements run: ${JSON.stringify(tally.report)}`);
}

async function bench(teardown: Teardown, signal: AbortSignal): Promise<void> {
  const { binaries, runAs, dir, logs } = await prepareWorkspace('bench-e2e', teardown, log);
  log(`settings: ${SECONDS} s runs, ${WARMUP_SECONDS} s warm-up, ${ROUNDS} rounds, modes ${MODES.join(',')}, clients ${CLIENTS.join(',')}, deployments ${DEPLOYMENT_NAMES.join(',')}`);

  const { admin, direct, upstream, version } = await benchUpstream(binaries.pgbench, SCALE, teardown, signal);
  const { database, password } = direct;
  log(`upstream: the machine's PostgreSQL on 127.0.0.1:${direct.port} (${version}), database ${database}; pgbench -i -s ${SCALE}`);
  for (const mode of MODES.filter((m) => CACHE_MODES.includes(m))) {
    scripts.set(mode, join(dir, `${mode}.sql`));
    await writeFile(scripts.get(mode)!, cacheScript(mode, SCALE));
  }

  const cluster: Cluster = { port: direct.port, user: direct.user, password, url: (name) => `postgresql://${direct.user}@127.0.0.1:${direct.port}/${name}` };
  const bouncer = await startPgBouncer(dir, PGBOUNCER, cluster, database, runAs, teardown);
  log(`PgBouncer ${bouncer.version} on 127.0.0.1:${bouncer.port}: transaction mode, pool 10, SCRAM auth${bouncer.servesPrepared ? '' : '; prepared statements not served by this version (prepared rows n/a)'}`);

  for (const name of DEPLOYMENT_NAMES) {
    const scope = new Teardown();
    try {
      const deployment = name === 'serve' ? await startServe(upstream, admin, scope) : await startSplit(upstream, admin, NATS_URL, scope);
      log(`${name}: ${deployment.description}`);
      await measure(deployment, admin, direct, bouncer, binaries.pgbench, logs, signal);
    } finally {
      await scope.run((error) => console.error(`[bench:e2e] stopping ${name} failed:`, error));
    }
  }
}

runBench('bench:e2e', bench);
