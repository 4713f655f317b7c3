/**
 * Benchmark of pgward's proxy passthrough against direct PostgreSQL and PgBouncer
 * (`npm run bench:proxy`). A measurement, not a test: figures below target print BELOW; only
 * errors exit non-zero.
 *
 * A throwaway cluster (fsync off, `pgbench -i -s 10`), PgBouncer (transaction mode, pool 10) and
 * pgward (transaction pooling, max_connections 10) run side by side; `pgbench -S` runs against
 * each in turn for every protocol mode and client count, for several rounds, and each round's
 * figures are compared with direct PostgreSQL's from the same round.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { POOL_CONFIG, startGateway } from './proxy-gateway.js';
import { startPipe } from './proxy-pipe.js';
import { benchSettings, describeOutcome as describe, eachRun, loadAverage, number, PGBOUNCER, prepareWorkspace, runBench, ratio, Results as RoundResults, subset, table, verdict, wholeNumber, type Pick } from './bench-kit.js';
import { initialize, isPolicyMode, policyScript, runArgs, select, type Endpoint, type Latency, type Mode } from './proxy-pgbench.js';
import { CLUSTER_SETTINGS, processCpu, startCluster, startPgBouncer, type Teardown } from './proxy-servers.js';

const ALL_MODES: readonly Mode[] = ['simple', 'extended', 'prepared', 'policy', 'policy-simple'];
/** `pipe`: a Node TCP pipe with no logic (proxy-pipe.ts), the floor for anything written in Node on this machine. */
const ALL_TARGETS = ['direct', 'PgBouncer', 'pipe', 'pgward'] as const;
type Target = (typeof ALL_TARGETS)[number];
const SCALE = 10;
const DATABASE = 'pgbench';
const MIN_VS_DIRECT = 0.6;
const MIN_VS_PGBOUNCER = 0.9;
const MAX_ADDED_P50_US = 80;
/** The `policy` rows' targets: pgward under REALISTIC_POLICY against the same script run directly and through PgBouncer. */
const POLICY_MIN_VS_DIRECT = 0.5;
const POLICY_MIN_VS_PGBOUNCER = 0.75;
const POLICY_MAX_ADDED_P50_US = 150;

function log(line: string): void {
  console.log(`[bench:proxy] ${line}`);
}

const { seconds: SECONDS, warmupSeconds: WARMUP_SECONDS, rounds: ROUNDS, modes: MODES, clients: CLIENTS } = benchSettings(ALL_MODES);
const TARGETS = subset('PGWARD_BENCH_TARGETS', ALL_TARGETS);
/** A fixed offered load (pgbench -R): pgward's CPU per transaction then hardly depends on what else the machine runs. */
const RATE = wholeNumber('PGWARD_BENCH_RATE', 'transactions per second', 1);

type Results = RoundResults<Target>;

function printReport(results: Results): void {
  const figure = (mode: Mode, clients: number, targets: readonly Target[], pick: Pick, format: (n: number) => string): string => results.cell(mode, clients, targets, pick, format);
  const tps = (target: Target) => (mode: Mode, clients: number) => figure(mode, clients, [target], (o) => o.tps, number.format);
  const share = (a: Target, b: Target) => (mode: Mode, clients: number) => figure(mode, clients, [a, b], (x, y) => x.tps / y.tps, (n) => `${ratio.format(n)}×`);
  const throughput = MODES.flatMap((mode) =>
    CLIENTS.map((clients) => [
      mode,
      String(clients),
      ...[tps('direct'), tps('PgBouncer'), tps('pipe'), tps('pgward'), share('pgward', 'direct'), share('pgward', 'PgBouncer'), share('PgBouncer', 'direct'), share('pipe', 'direct')].map((cell) => cell(mode, clients)),
    ]),
  );
  console.log(`\nThroughput: median TPS over ${ROUNDS} rounds; ratios are medians of the per-round ratios; pipe = a Node TCP pipe with no logic\n`);
  console.log(table(['mode', 'c', 'direct tps', 'PgBouncer tps', 'pipe tps', 'pgward tps', 'pgward/direct', 'pgward/PgBouncer', 'PgBouncer/direct', 'pipe/direct'], throughput));

  const addedP50: Pick = (pgward, direct) => pgward.latency!.p50 - direct.latency!.p50;
  const at = (target: Target, key: keyof Latency) => (mode: Mode) => figure(mode, 1, [target], (o) => o.latency![key], number.format);
  const added = (target: Target) => (mode: Mode): string => figure(mode, 1, [target, 'direct'], addedP50, number.format);
  const latency = MODES.map((mode) => [
    mode,
    '1',
    ...[at('direct', 'p50'), at('direct', 'p99'), at('PgBouncer', 'p50'), at('PgBouncer', 'p99'), added('pipe'), at('pgward', 'p50'), at('pgward', 'p99'), added('pgward')].map((cell) => cell(mode)),
  ]);
  console.log(`\nLatency at c=1 (µs, from pgbench --log): medians over ${ROUNDS} rounds; added = p50 − direct p50 of the same round\n`);
  console.log(table(['mode', 'c', 'direct p50', 'direct p99', 'PgBouncer p50', 'PgBouncer p99', 'pipe added p50', 'pgward p50', 'pgward p99', 'pgward added p50'], latency));

  const failures = results.failures(MODES, CLIENTS, TARGETS);
  if (failures.length > 0) console.log(`\nFailed runs (shown as fail above):\n${failures.join('\n')}`);

  const passthrough = MODES.filter((mode) => !isPolicyMode(mode));
  const targets = (mode: Mode, minVsDirect: number, minVsBouncer: number, maxAddedUs: number, modes: readonly Mode[]): void => {
    const vsDirect = results.median(mode, 10, ['pgward', 'direct'], (w, d) => w.tps / d.tps);
    const vsBouncer = results.median(mode, 10, ['pgward', 'PgBouncer'], (w, b) => w.tps / b.tps);
    const addedByMode = modes.map((m) => ({ mode: m, us: results.median(m, 1, ['pgward', 'direct'], addedP50) }));
    const worst = Math.max(...addedByMode.map((a) => a.us));
    // A partial run (PGWARD_BENCH_MODES, PGWARD_BENCH_CLIENTS) may lack the c=10 run of `mode`.
    if (!Number.isNaN(vsDirect)) console.log(`target pgward/direct at c=10 ${mode} >= ${ratio.format(minVsDirect)}×: ${ratio.format(vsDirect)}× ${verdict(vsDirect >= minVsDirect)}`);
    if (!Number.isNaN(vsBouncer)) console.log(`target pgward/PgBouncer at c=10 ${mode} >= ${ratio.format(minVsBouncer)}×: ${ratio.format(vsBouncer)}× ${verdict(vsBouncer >= minVsBouncer)}`);
    console.log(`target p50 added latency at c=1 <= ${maxAddedUs} µs: ${addedByMode.map((a) => `${a.mode} ${number.format(a.us)} µs`).join(', ')} ${verdict(worst <= maxAddedUs)}`);
  };
  console.log('');
  if (passthrough.length > 0) targets('extended', MIN_VS_DIRECT, MIN_VS_PGBOUNCER, MAX_ADDED_P50_US, passthrough);
  for (const mode of MODES.filter(isPolicyMode)) targets(mode, POLICY_MIN_VS_DIRECT, POLICY_MIN_VS_PGBOUNCER, POLICY_MAX_ADDED_P50_US, [mode]);
}

async function admin(url: string, statements: readonly string[]): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const answers: string[] = [];
    for (const sql of statements) answers.push(JSON.stringify((await client.query(sql)).rows[0] ?? null));
    return answers;
  } finally {
    await client.end();
  }
}

async function bench(teardown: Teardown, signal: AbortSignal): Promise<void> {
  const seconds = SECONDS;
  const { binaries, runAs, dir, logs } = await prepareWorkspace('bench-proxy', teardown, log);

  const cluster = await startCluster(dir, binaries, runAs, teardown);
  const [version] = await admin(cluster.url('postgres'), ['select version()', `create database ${DATABASE}`, 'create database pgward_state']);
  log(`cluster on 127.0.0.1:${cluster.port}: ${version}, ${CLUSTER_SETTINGS.join(', ')}, SCRAM auth`);
  const direct: Endpoint = { port: cluster.port, user: cluster.user, password: cluster.password, database: DATABASE };
  log(`pgbench -i -s ${SCALE}`);
  await initialize(binaries.pgbench, direct, SCALE, signal);

  const bouncer = await startPgBouncer(dir, PGBOUNCER, cluster, DATABASE, runAs, teardown);
  log(`PgBouncer ${bouncer.version} on 127.0.0.1:${bouncer.port}: transaction mode, pool 10, SCRAM auth; prepared statements ${bouncer.servesPrepared ? 'served' : 'not served by this version (prepared rows n/a)'}`);
  const pipePort = await startPipe(cluster.port, teardown);
  log(`Node pipe (no logic) on 127.0.0.1:${pipePort}`);
  const gateway = await startGateway(cluster.url('pgward_state'), { port: cluster.port, database: DATABASE, user: cluster.user, password: cluster.password }, teardown);
  log(`pgward proxy on 127.0.0.1:${gateway.port}: no TLS, pool ${JSON.stringify(POOL_CONFIG)}, agent ${gateway.agent.user}`);

  const endpoints: Record<Target, Endpoint> = { direct, PgBouncer: { ...direct, port: bouncer.port }, pipe: { ...direct, port: pipePort }, pgward: { port: gateway.port, ...gateway.agent } };
  const governed: Endpoint = { port: gateway.port, ...gateway.governed };
  const inProcess = async (): Promise<NodeJS.CpuUsage> => process.cpuUsage();
  const proxyCpu: Partial<Record<Target, () => Promise<NodeJS.CpuUsage>>> = { PgBouncer: () => processCpu(bouncer.pid), pipe: inProcess, pgward: inProcess };
  const script = join(dir, 'policy.sql');
  await writeFile(script, policyScript(SCALE));
  const serves = (target: Target, mode: Mode): boolean => target !== 'PgBouncer' || mode !== 'prepared' || bouncer.servesPrepared;
  const runs = ROUNDS * MODES.length * CLIENTS.length * TARGETS.length - (bouncer.servesPrepared || !MODES.includes('prepared') || !TARGETS.includes('PgBouncer') ? 0 : ROUNDS * CLIENTS.length);
  log(`${runs} runs of ${seconds} s: pgbench ${runArgs({ mode: 'extended', clients: 10, seconds, ...(RATE ? { rate: RATE } : {}) }).join(' ')} (and the other modes and client counts), --log at c=1`);

  if (WARMUP_SECONDS > 0) {
    log(`warm-up: ${WARMUP_SECONDS} s of each mode at c=10 on each target, not measured`);
    for (const mode of MODES) {
      for (const target of TARGETS) {
        signal.throwIfAborted();
        if (!serves(target, mode)) continue;
        const endpoint = isPolicyMode(mode) && target === 'pgward' ? governed : endpoints[target];
        const outcome = await select(binaries.pgbench, endpoint, { mode, clients: 10, seconds: WARMUP_SECONDS, script }, signal);
        if (!outcome.ok) log(`warm-up ${mode} ${target}: ${describe(outcome)}`);
      }
    }
  }
  const results: Results = new RoundResults<Target>();
  await eachRun({ rounds: ROUNDS, modes: MODES, clients: CLIENTS, targets: TARGETS, serves }, results, signal, async ({ mode, clients, target, round, progress }) => {
    const logPrefix = clients === 1 ? join(logs, `${target}-${mode}-${round}`) : undefined;
    // A proxy's CPU time per transaction is a figure the machine's noise barely moves: pgward and the pipe run in this process, PgBouncer in its own.
    const cpuOf = proxyCpu[target];
    const cpuBefore = await cpuOf?.();
    const endpoint = isPolicyMode(mode) && target === 'pgward' ? governed : endpoints[target];
    const outcome = await select(binaries.pgbench, endpoint, { mode, clients, seconds, script, ...(logPrefix ? { logPrefix } : {}), ...(RATE ? { rate: RATE } : {}) }, signal);
    const cpuAfter = await cpuOf?.();
    const cpu = cpuBefore && cpuAfter && { user: cpuAfter.user - cpuBefore.user, system: cpuAfter.system - cpuBefore.system };
    const perTransaction =
      cpu && outcome.ok && outcome.transactions > 0
        ? `, ${number.format((cpu.user + cpu.system) / outcome.transactions)} µs CPU per transaction in ${target} (user ${number.format(cpu.user / outcome.transactions)}, system ${number.format(cpu.system / outcome.transactions)})`
        : '';
    log(`${progress} ${mode} c=${clients} ${target}: ${describe(outcome)}${perTransaction}`);
    return outcome;
  });
  log(`pgward published ${number.format(gateway.messages())} bus messages of decisions; load average ${loadAverage()}`);
  printReport(results);
}

runBench('bench:proxy', bench);
