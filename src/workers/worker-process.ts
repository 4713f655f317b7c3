/**
 * One worker process of `pgward serve`, as the supervisor keeps it: forked from bin/pgward.js
 * (`pgward worker NAME --role ...`), started again with backoff when it exits unexpectedly or stops
 * beating (a stalled event loop), and stopped in order at shutdown.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../logger.js';
import type { Role } from '../main.js';
import { DEFAULT_BACKOFF, failuresAfterExit, restartDelay, type BackoffPolicy } from './backoff.js';
import { Channel } from './channel.js';

const BIN = fileURLToPath(new URL('../../bin/pgward.js', import.meta.url));
/** Start-up includes compiling TypeScript (tsx) and the projections taking their locks. */
const READY_TIMEOUT_MS = 120_000;
const STOP_TIMEOUT_MS = 15_000;
export const BEAT_INTERVAL_MS = 1_000;
/** A worker whose event loop did not beat for this long is killed and restarted. */
const DEFAULT_STALL_MS = 15_000;

/**
 * The pipeline's garbage is collected on its own thread: the parallel and concurrent collectors'
 * helper threads cost it about 6 % more CPU a decision on a 2-core machine shared with the
 * proxy and two PostgreSQL servers (docs/benchmarks.md), and nothing waits on its pauses but its
 * own batches. The proxy, in the supervisor, keeps them: its pauses are its clients' latency.
 */
export const PIPELINE_NODE_OPTIONS: readonly string[] = ['--single-threaded-gc'];

export interface WorkerSpec {
  readonly name: string;
  readonly roles: readonly Role[];
  /** The environment of the worker beyond the supervisor's own. */
  readonly env?: NodeJS.ProcessEnv;
  /** Node and V8 options of the worker beyond the supervisor's own. */
  readonly execArgv?: readonly string[];
}

export interface WorkerHooks {
  /** Called with every new channel, before the worker is waited for: the supervisor answers its asks there. */
  attach(channel: Channel): void;
  /** Called after the worker exited, before it is started again. */
  detach(channel: Channel): Promise<void>;
  onRestart(name: string): void;
}

export interface WorkerOptions {
  readonly backoff?: BackoffPolicy;
  readonly stallMs?: number;
}

interface Ready {
  readonly httpUrl: string | undefined;
}

export class WorkerProcess {
  private child: ChildProcess | undefined;
  private channel: Channel | undefined;
  private stopping = false;
  private failures = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private stallTimer: NodeJS.Timeout | undefined;
  private lastBeat = 0;
  private readyInfo: Ready | undefined;
  /** Ready once: from then on an exit is a crash to restart after, not a failed start-up for the caller to handle. */
  private started = false;

  constructor(
    readonly spec: WorkerSpec,
    private readonly logger: Logger,
    private readonly hooks: WorkerHooks,
    private readonly options: WorkerOptions = {},
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get httpUrl(): string | undefined {
    return this.readyInfo?.httpUrl;
  }

  /** The channel to the running worker; undefined between a crash and its restart. */
  get live(): Channel | undefined {
    return this.readyInfo ? this.channel : undefined;
  }

  /** Starts the worker and resolves once it is ready; rejects when it exits or times out first. */
  async start(): Promise<void> {
    // In a process group of its own: signals to the supervisor's group (Ctrl-C, a closing terminal's SIGHUP)
    // are the supervisor's to act on, which stops its workers in order.
    const child = fork(BIN, ['worker', this.spec.name, ...this.spec.roles.flatMap((role) => ['--role', role])], {
      env: { ...process.env, ...this.spec.env },
      execArgv: [...process.execArgv, ...(this.spec.execArgv ?? [])],
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      detached: true,
    });
    const channel = new Channel(child);
    this.child = child;
    this.channel = channel;
    this.readyInfo = undefined;
    // A worker whose start-up fails says why before it exits.
    let failure: string | undefined;
    channel.answer<string>('failed', (reason) => void (failure = reason));
    this.hooks.attach(channel);
    const startedAt = Date.now();
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.once('exit', (code, signal) => void this.exited(child, channel, startedAt, code, signal));
    channel.on('beat', () => (this.lastBeat = Date.now()));

    let timer: NodeJS.Timeout | undefined;
    const ready = await Promise.race([
      new Promise<Ready>((resolve) => channel.on<Ready>('ready', resolve)),
      exited.then(() => Promise.reject(new Error(failure ?? `worker ${this.spec.name} exited during start-up`))),
      new Promise<never>((_resolve, reject) => (timer = setTimeout(() => reject(new Error(`worker ${this.spec.name} was not ready within ${READY_TIMEOUT_MS / 1000} s`)), READY_TIMEOUT_MS))),
    ])
      .catch((error: unknown) => {
        // A worker that never became ready is killed: its exit starts the restart (or ends a failed start-up).
        child.kill('SIGKILL');
        throw error;
      })
      .finally(() => clearTimeout(timer));
    this.readyInfo = ready;
    this.started = true;
    this.lastBeat = Date.now();
    this.watchBeats(child);
    this.logger.info({ worker: this.spec.name, worker_pid: child.pid, roles: this.spec.roles }, 'worker ready');
  }

  /** Asks the worker to stop (it finishes its work in flight), then waits; kills it after STOP_TIMEOUT_MS. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    clearInterval(this.stallTimer);
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    this.channel?.tell('stop');
    const late = setTimeout(() => {
      this.logger.error({ worker: this.spec.name, worker_pid: child.pid }, `worker did not stop within ${STOP_TIMEOUT_MS / 1000} s; killed`);
      child.kill('SIGKILL');
    }, STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(late);
  }

  private watchBeats(child: ChildProcess): void {
    clearInterval(this.stallTimer);
    const stallMs = this.options.stallMs ?? DEFAULT_STALL_MS;
    this.stallTimer = setInterval(() => {
      if (Date.now() - this.lastBeat <= stallMs || child.exitCode !== null) return;
      this.logger.error({ worker: this.spec.name, worker_pid: child.pid, stalled_ms: Date.now() - this.lastBeat }, 'worker stalled; killed');
      clearInterval(this.stallTimer);
      child.kill('SIGKILL');
    }, BEAT_INTERVAL_MS);
    this.stallTimer.unref();
  }

  private async exited(child: ChildProcess, channel: Channel, startedAt: number, code: number | null, signal: NodeJS.Signals | null): Promise<void> {
    if (this.child === child) clearInterval(this.stallTimer);
    await this.hooks.detach(channel);
    if (this.stopping || this.child !== child || !this.started) return;
    this.readyInfo = undefined;
    const backoff = this.options.backoff ?? DEFAULT_BACKOFF;
    this.failures = failuresAfterExit(backoff, this.failures, Date.now() - startedAt);
    const delay = restartDelay(backoff, this.failures);
    this.logger.error({ worker: this.spec.name, worker_pid: child.pid, code, signal, restart_in_ms: delay }, 'worker exited; restarting');
    this.restartTimer = setTimeout(() => {
      if (this.stopping) return;
      this.hooks.onRestart(this.spec.name);
      this.start().catch((error: unknown) => this.logger.error({ err: error, worker: this.spec.name }, 'worker restart failed'));
    }, delay);
  }
}
