/**
 * A DigestPool worker: answers each DigestJob with the digest records of its entries. It keeps
 * nothing between jobs, the HMAC keys included.
 */
import { parentPort } from 'node:worker_threads';
import { writeDigestRecords } from './digest-records.js';
import type { DigestJob, DigestReply } from './digest-pool.js';
import { EntryDigests } from './entry-digests.js';
import { decodeEntries } from './entry-wire.js';

const port = parentPort;
if (!port) throw new Error('digest-worker.ts runs as a worker thread');
const digests = new EntryDigests();

port.on('message', (job: DigestJob) => {
  // Buffer.alloc gives the records an ArrayBuffer of their own: transferring it moves exactly them.
  const records = writeDigestRecords(decodeEntries(job.entries), job.keys, digests).buffer as ArrayBuffer;
  port.postMessage({ id: job.id, records } satisfies DigestReply, [records]);
});
port.postMessage({ ready: true } satisfies DigestReply);
