/**
 * Worker threads that compute digest records (digest-records.ts) of chunks of entries. A worker
 * holds the process open only while it has jobs; one that fails fails its jobs with an
 * AuditVerifyError and is replaced when the next verification starts.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
export interface DigestJob {
  readonly id: number;
  /** encodeEntries of the chunk. */
  readonly entries: string;
  readonly keys: ReadonlyMap<string, Uint8Array>;
}

export type DigestReply = { readonly ready: true } | { readonly id: number; readonly records: ArrayBuffer };

export type AuditVerifyErrorCode = 'WORKER_FAILED';

export class AuditVerifyError extends Error {
  override readonly name = 'AuditVerifyError';
  constructor(
    readonly code: AuditVerifyErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** Jobs a worker holds at once: one to work on, one queued so it never waits for this thread. */
const DEPTH = 2;

/** Under tsx (tests, the bench, bin/pgward.js) a worker loads TypeScript through bin/ts-worker.js; built, it runs the JS module itself. */
function spawn(): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(new URL('./digest-worker.js', import.meta.url));
  return new Worker(new URL('../../bin/ts-worker.js', import.meta.url), { workerData: { module: new URL('./digest-worker.ts', import.meta.url).href } });
}

interface Pending {
  readonly resolve: (records: Buffer) => void;
  readonly reject: (error: Error) => void;
}

class PoolWorker {
  readonly #worker = spawn();
  readonly #pending = new Map<number, Pending>();
  #ready = false;
  #failed = false;

  constructor() {
    this.#worker.on('message', (reply: DigestReply) => this.#reply(reply));
    this.#worker.on('error', (error) => this.#fail(`an audit digest worker failed: ${error.message}`));
    this.#worker.on('messageerror', () => this.#fail('an audit digest worker sent a message that could not be read'));
    this.#worker.on('exit', (code) => this.#fail(`an audit digest worker exited (code ${code})`));
    // After the listeners: a 'message' listener refs the worker's port again.
    this.#worker.unref();
  }

  get failed(): boolean {
    return this.#failed;
  }

  get free(): number {
    return this.#ready && !this.#failed ? DEPTH - this.#pending.size : 0;
  }

  digest(job: DigestJob): Promise<Buffer> {
    this.#worker.postMessage(job);
    if (this.#pending.size === 0) this.#worker.ref();
    return new Promise((resolve, reject) => this.#pending.set(job.id, { resolve, reject }));
  }

  terminate(): Promise<number> {
    return this.#worker.terminate();
  }

  #reply(reply: DigestReply): void {
    if ('ready' in reply) {
      this.#ready = true;
      return;
    }
    const pending = this.#pending.get(reply.id);
    if (!pending) return;
    this.#pending.delete(reply.id);
    if (this.#pending.size === 0) this.#worker.unref();
    pending.resolve(Buffer.from(reply.records));
  }

  #fail(message: string): void {
    if (this.#failed) return;
    this.#failed = true;
    const error = new AuditVerifyError('WORKER_FAILED', message);
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
    void this.#worker.terminate();
  }
}

export class DigestPool {
  readonly size: number;
  #workers: PoolWorker[] = [];
  #nextId = 0;

  constructor(size: number) {
    if (!Number.isSafeInteger(size) || size < 1) throw new RangeError('a digest pool needs at least one worker');
    this.size = size;
  }

  /** Starts the workers not running (all, the first time); they take jobs once they have loaded. */
  start(): void {
    this.#workers = this.#workers.filter((worker) => !worker.failed);
    while (this.#workers.length < this.size) this.#workers.push(new PoolWorker());
  }

  /** Jobs the pool takes now without queueing more than DEPTH on any worker. */
  get free(): number {
    return this.#workers.reduce((sum, worker) => sum + worker.free, 0);
  }

  /** The records of the encoded entries, from the worker with the most room. */
  digest(entries: string, keys: ReadonlyMap<string, Uint8Array>): Promise<Buffer> {
    const worker = this.#workers.reduce((best, w) => (w.free > best.free ? w : best));
    if (worker.free === 0) throw new RangeError('the digest pool has no room; check free first');
    return worker.digest({ id: this.#nextId++, entries, keys });
  }

  async close(): Promise<void> {
    const workers = this.#workers;
    this.#workers = [];
    await Promise.all(workers.map((worker) => worker.terminate()));
  }
}

let shared: DigestPool | undefined;

/** The process's pool: one worker per core but one, since the calling thread computes digests too. */
export function sharedDigestPool(): DigestPool {
  shared ??= new DigestPool(Math.max(1, availableParallelism() - 1));
  return shared;
}
