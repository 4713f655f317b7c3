/**
 * The decision bus alone (`npm run bench:bus`): the proxy's publisher (proxy/decisions.ts, as it
 * ships) sending decisions of a realistic size to NATS JetStream at a steady rate, and a durable
 * consumer in a process of its own taking them as ingest does (JSON parse of each message, an ack
 * after it). It prints what each side spends per decision, apart from the proxy's statement path
 * and ingest's append: the publishing process less what making the records alone costs (measured
 * first, at the same rate), the consuming process, and the NATS server (when it runs on this
 * machine), with the messages sent and their size. Run it on two commits to compare the
 * publisher's batching or encoding.
 *
 * Settings: PGWARD_BENCH_BUS_RATES (decisions a second, 2000,5000,10000), PGWARD_BENCH_SECONDS
 * (per run, 5), PGWARD_BENCH_ROUNDS (3), NATS_URL (nats://127.0.0.1:4222).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { BusRecord } from '../../proxy/decisions.js';
import { DecisionPublisher } from '../../proxy/decisions.js';
import { connectNatsBus } from '../../src/bus/nats.js';
import { processes } from '../support/pgward-process.js';
import { median, number, ratio, runBench, table, wholeNumber } from './bench-kit.js';

const NATS_URL = process.env.NATS_URL || 'nats://127.0.0.1:4222';
const SECONDS = wholeNumber('PGWARD_BENCH_SECONDS', 'seconds', 1, 5);
const ROUNDS = wholeNumber('PGWARD_BENCH_ROUNDS', 'rounds', 1, 3);
const RATES = (process.env.PGWARD_BENCH_BUS_RATES || '2000,5000,10000').split(',').map(Number);
const CLOCK_TICK_US = 10_000;

const PROJECT = 'prj_csozsuj26bfjkopx75tno34hrs';
const SESSION = `"project_id":"${PROJECT}","credential_id":"agt_jzq4krw6ojar2jjrgo3yytwcmf","session_id":"vm-24783.1795731584.2","source":"wire","region":"local","client_ip":"127.0.0.1"`;
const TEXT = `"sql":"SELECT abalance FROM pgbench_accounts WHERE aid = $1;","normalized_sql":"SELECT abalance FROM pgbench_accounts WHERE aid = $1;","query_hash":"64eb481e6d342ccf","statement_kind":"select","tables_read":["public.pgbench_accounts"],"tables_written":[],"parsed":true`;

/** A pgbench -S decision's members as session-audit.ts publishes them (about 750 bytes with the stamp). */
function members(n: number): string {
  return `"event":"query",${SESSION},"ts":"${new Date().toISOString()}",${TEXT},"decision_rule":"","reason":"","cache_status":"miss","rows_returned":"1","bytes_out":"26","latency_us":${n % 5000},"tables_blocked":[],"approval_id":null,"ran_on":"primary","replica_id":null,"upstream_region":"local"`;
}

/** Clock ticks (utime + stime) of a process, from /proc. */
function ticks(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

interface ConsumerReport {
  readonly decisions: number;
  readonly messages: number;
  readonly bytes: number;
  readonly cpuUs: number;
}

/** The consumer process: takes every message of the stream as ingest does; answers its count, and its report (then exits). */
async function consumer(stream: string, subject: string): Promise<void> {
  const bus = await connectNatsBus({ url: NATS_URL, stream, subject });
  let decisions = 0;
  let messages = 0;
  let bytes = 0;
  let started = process.cpuUsage();
  await bus.consume({ durable: 'ingest', maxInFlight: 64 }, async (delivery) => {
    const record = JSON.parse(Buffer.from(delivery.data).toString('utf8')) as BusRecord;
    messages++;
    bytes += delivery.data.length;
    decisions += record.kind === 'batch' ? record.decisions.length : 1;
  });
  process.on('message', (ask: string) => {
    if (ask === 'start') {
      started = process.cpuUsage();
      decisions = messages = bytes = 0;
      process.send!('started');
      return;
    }
    if (ask === 'count') {
      process.send!(decisions);
      return;
    }
    const used = process.cpuUsage(started);
    process.send!({ decisions, messages, bytes, cpuUs: used.user + used.system } satisfies ConsumerReport);
    void bus.close().then(() => process.exit(0));
  });
  process.send!('ready');
}

function ask<T>(child: ChildProcess, message: string): Promise<T> {
  return new Promise((resolve) => {
    child.once('message', (answer) => resolve(answer as T));
    child.send(message);
  });
}

interface Run {
  readonly rate: number;
  readonly decisions: number;
  readonly messages: number;
  readonly bytesPerDecision: number;
  /** Making the records alone (recordsAlone); publisherUs is the publishing process's CPU less it. */
  readonly recordsUs: number;
  readonly publisherUs: number;
  readonly consumerUs: number;
  readonly natsUs: number | undefined;
}

/** Makes `rate` decisions' records a second for SECONDS and hands each to `take`; returns how many. */
async function offer(rate: number, take: (record: string) => void): Promise<number> {
  const started = performance.now();
  let sent = 0;
  while (performance.now() - started < SECONDS * 1000) {
    const due = Math.floor(((performance.now() - started) / 1000) * rate);
    while (sent < due) take(members(sent++));
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return sent;
}

/** CPU µs a decision of making the records at `rate` and nothing else: what the publishing process spends without the bus. */
async function recordsAlone(rate: number): Promise<number> {
  const cpuBefore = process.cpuUsage();
  const sent = await offer(rate, () => undefined);
  const cpu = process.cpuUsage(cpuBefore);
  return (cpu.user + cpu.system) / sent;
}

async function run(rate: number): Promise<Run> {
  const records = await recordsAlone(rate);
  const tag = randomBytes(4).toString('hex');
  const stream = `PGWARD_BENCH_BUS_${tag}`;
  const subject = `pgward.benchbus.${tag}`;
  const bus = await connectNatsBus({ url: NATS_URL, stream, subject });
  const child = fork(fileURLToPath(import.meta.url), ['consumer', stream, subject]);
  try {
    await new Promise((resolve) => child.once('message', resolve));
    const publisher = new DecisionPublisher(bus, { proxyId: 'vm-bench', bootEpoch: 1 }, 100_000);
    const nats = processes().find((p) => /(^|\/)nats-server( |$)/.test(p.cmdline))?.pid;
    await ask(child, 'start');
    const natsBefore = nats === undefined ? 0 : ticks(nats);
    const cpuBefore = process.cpuUsage();
    const sent = await offer(rate, (record) => publisher.publishMembers(PROJECT, record));
    while (publisher.stats().published < sent) await new Promise((resolve) => setTimeout(resolve, 5));
    const cpu = process.cpuUsage(cpuBefore);
    while ((await ask<number>(child, 'count')) < sent) await new Promise((resolve) => setTimeout(resolve, 5));
    const report = await ask<ConsumerReport>(child, 'report');
    const natsAfter = nats === undefined ? 0 : ticks(nats);
    await publisher.close();
    return {
      rate,
      decisions: report.decisions,
      messages: report.messages,
      bytesPerDecision: report.bytes / report.decisions,
      recordsUs: records,
      publisherUs: (cpu.user + cpu.system) / sent - records,
      consumerUs: report.cpuUs / report.decisions,
      natsUs: nats === undefined ? undefined : ((natsAfter - natsBefore) * CLOCK_TICK_US) / sent,
    };
  } finally {
    child.kill();
    await bus.close();
    const nc = await connect({ servers: NATS_URL });
    await (await jetstreamManager(nc)).streams.delete(stream).catch(() => undefined);
    await nc.close();
  }
}

async function bench(): Promise<void> {
  console.log(`[bench:bus] NATS ${NATS_URL}; ${SECONDS} s runs, ${ROUNDS} rounds, rates ${RATES.join(',')} decisions/s`);
  const runs: Run[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const rate of RATES) {
      const result = await run(rate);
      console.log(`[bench:bus] round ${round}, ${rate}/s: ${JSON.stringify(result)}`);
      runs.push(result);
    }
  }
  const us = (values: (number | undefined)[]): string => (values.includes(undefined) ? 'n/a' : ratio.format(median(values as number[])));
  console.log(`\nPer decision, medians over ${ROUNDS} rounds (CPU µs: making the records alone, the publishing process less that, the consuming process, the NATS server)\n`);
  console.log(
    table(
      ['rate', 'decisions/message', 'bytes/decision', 'records µs', 'publisher µs', 'consumer µs', 'NATS µs'],
      RATES.map((rate) => {
        const of = runs.filter((r) => r.rate === rate);
        return [number.format(rate), number.format(median(of.map((r) => r.decisions / r.messages))), number.format(median(of.map((r) => r.bytesPerDecision))), us(of.map((r) => r.recordsUs)), us(of.map((r) => r.publisherUs)), us(of.map((r) => r.consumerUs)), us(of.map((r) => r.natsUs))];
      }),
    ),
  );
}

if (process.argv[2] === 'consumer') void consumer(process.argv[3]!, process.argv[4]!);
else runBench('bench:bus', bench);
