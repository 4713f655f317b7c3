/** Runs pgbench against one target and reads its figures: TPS from the summary, latencies from `--log`. */
import { spawn } from 'node:child_process';
import { readdir, readFile, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export interface Endpoint {
  readonly port: number;
  readonly user: string;
  readonly password: string;
  readonly database: string;
}

/**
 * pgbench's protocol modes, `policy` (`policy-simple`): the ten-row script of policyScript() on the
 * extended (simple) protocol, and the result cache's modes of cacheScript().
 */
export type Mode = 'simple' | 'extended' | 'prepared' | 'policy' | 'policy-simple' | 'cache-hits' | 'cache-mixed';

/** The modes that run policyScript() rather than `-S`; through pgward, under the bench's realistic policy. */
export const isPolicyMode = (mode: Mode): boolean => mode === 'policy' || mode === 'policy-simple';

/** Ten consecutive accounts of a `pgbench -i -s <scale>` database, with the two columns the bench's policy masks. */
export function policyScript(scale: number): string {
  return `\\set aid random(1, ${scale * 100_000 - 9})\nSELECT aid, bid, abalance, filler FROM pgbench_accounts WHERE aid BETWEEN :aid AND :aid + 9;\n`;
}

/** The modes that run cacheScript() rather than `-S`. */
export const isCacheMode = (mode: Mode): boolean => mode === 'cache-hits' || mode === 'cache-mixed';

/** The accounts the cache modes repeat. */
export const HOT_KEYS = 100;

/**
 * pgbench -S's statement over few keys, for the result cache (simple protocol): `cache-hits` draws
 * every key from the first HOT_KEYS accounts, so once warm every statement is a hit; `cache-mixed`
 * draws 9 in 10 from them and the rest from all the accounts (about 90 % hits).
 */
export function cacheScript(mode: Mode, scale: number): string {
  const hot = `random(1, ${HOT_KEYS})`;
  const aid = mode === 'cache-hits' ? hot : `case when random(1, 10) <= 9 then ${hot} else random(1, ${scale * 100_000}) end`;
  return `\\set aid ${aid}\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n`;
}

export interface Run {
  readonly mode: Mode;
  readonly clients: number;
  readonly seconds: number;
  /** Where `--log` writes its per-transaction log; no log without it. */
  readonly logPrefix?: string;
  /** The file holding policyScript() (mode `policy`) or cacheScript() (the cache modes). */
  readonly script?: string;
  /** Transactions per second offered (`pgbench -R`) instead of as many as the target takes. */
  readonly rate?: number;
}

export interface Latency {
  readonly p50: number;
  readonly p99: number;
}

export type Outcome =
  | { readonly ok: true; readonly tps: number; readonly transactions: number; /** Microseconds, when logged. */ readonly latency?: Latency }
  | { readonly ok: false; readonly reason: string; /** When pgbench reported them though the run failed (none completed in time). */ readonly transactions?: number };

/** Beyond the run's own duration: connecting 50 clients with SCRAM, and a proxy that stops answering. */
const GRACE_MS = 60_000;

function pgbench(binary: string, endpoint: Endpoint, args: readonly string[], signal: AbortSignal, timeoutMs: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, [...args, '-h', '127.0.0.1', '-p', String(endpoint.port), '-U', endpoint.user, endpoint.database], {
      detached: true,
      env: { ...process.env, LC_ALL: 'C', PGPASSWORD: endpoint.password, PGSSLMODE: 'disable', PGAPPNAME: 'pgbench' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const stop = (): void => void child.kill('SIGKILL');
    const timer = setTimeout(stop, timeoutMs);
    signal.addEventListener('abort', stop, { once: true });
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code, killedBy) => {
      clearTimeout(timer);
      signal.removeEventListener('abort', stop);
      if (signal.aborted) return reject(signal.reason);
      if (killedBy) return reject(new Error(`pgbench ${args.join(' ')} did not finish within ${timeoutMs / 1000} s: ${output.trim()}`));
      resolve({ code, output });
    });
  });
}

/** `pgbench -i -s <scale>`: the four tables with scale × 100,000 accounts. */
export async function initialize(binary: string, endpoint: Endpoint, scale: number, signal: AbortSignal): Promise<void> {
  const { code, output } = await pgbench(binary, endpoint, ['-i', '-s', String(scale), '-q'], signal, 600_000);
  if (code !== 0) throw new Error(`pgbench -i failed (exit ${code}): ${output.trim()}`);
}

/** The pgbench arguments of one run, as the report prints them. */
export function runArgs(run: Run): string[] {
  const workload = isPolicyMode(run.mode)
    ? ['-f', run.script ?? 'policy.sql', '-M', run.mode === 'policy' ? 'extended' : 'simple']
    : isCacheMode(run.mode)
      ? ['-f', run.script ?? `${run.mode}.sql`, '-M', 'simple']
      : ['-S', '-M', run.mode];
  const args = [...workload, '-n', '-c', String(run.clients), '-j', String(Math.min(run.clients, 2)), '-T', String(run.seconds), ...(run.rate ? ['-R', String(run.rate)] : [])];
  return run.logPrefix ? [...args, '--log', `--log-prefix=${run.logPrefix}`] : args;
}

/**
 * One pgbench run. A run pgbench reports as failed (a client aborted, a connection refused)
 * is an outcome to report, not an error of the bench.
 */
export async function select(binary: string, endpoint: Endpoint, run: Run, signal: AbortSignal): Promise<Outcome> {
  const { code, output } = await pgbench(binary, endpoint, runArgs(run), signal, run.seconds * 1000 + GRACE_MS);
  if (code !== 0) {
    const lines = output.split('\n').filter((line) => /error|fatal|abort/i.test(line));
    return { ok: false, reason: `exit ${code}: ${(lines[0] ?? output.trim().split('\n').at(-1) ?? '').trim()}` };
  }
  const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(output);
  const transactions = /number of transactions actually processed: (\d+)/.exec(output);
  // Clients that took the whole run to connect (SCRAM for 50 on a busy machine) leave a summary without a rate.
  if (!tps && transactions?.[1] === '0') return { ok: false, reason: 'no transaction completed within the run', transactions: 0 };
  if (!tps || !transactions) throw new Error(`cannot read pgbench's summary: ${output.trim()}`);
  const latencies = run.logPrefix ? await readLatencies(run.logPrefix) : undefined;
  const latency = latencies && { p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) };
  return { ok: true, tps: Number(tps[1]), transactions: Number(transactions[1]), ...(latency ? { latency } : {}) };
}

/** The third column of every `<prefix>.<pid>[.<thread>]` log line is the transaction's latency in µs; the files are removed. */
async function readLatencies(prefix: string): Promise<number[]> {
  const dir = dirname(prefix);
  const files = (await readdir(dir)).filter((name) => name.startsWith(`${basename(prefix)}.`)).map((name) => join(dir, name));
  const latencies: number[] = [];
  for (const file of files) {
    for (const line of (await readFile(file, 'utf8')).split('\n')) {
      const latency = Number(line.split(' ')[2]);
      if (line && Number.isFinite(latency)) latencies.push(latency);
    }
    await rm(file);
  }
  if (latencies.length === 0) throw new Error(`pgbench wrote no latency log at ${prefix}`);
  return latencies.sort((a, b) => a - b);
}

function percentile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}
