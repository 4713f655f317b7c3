import { lookup as dnsLookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import type { AllowedNetworks } from './networks.js';

/** How much of a receiver's answer is read; the rest is cut off (only the status decides). */
export const MAX_RESPONSE_BYTES = 64 * 1024;

export interface Attempted {
  /** The receiver's status, or null when none came (refused, unreachable, timed out). */
  readonly statusCode: number | null;
  readonly latencyMs: number;
  /** Why the attempt failed, or null when it succeeded (a 2xx). Never quotes a header or the body sent. */
  readonly error: string | null;
}

export interface SendOptions {
  readonly allowed: AllowedNetworks;
  readonly timeoutMs: number;
  /** Resolves a host name to its addresses; the system resolver by default. */
  readonly resolve?: (host: string) => Promise<string[]>;
  /** Aborts the attempt (the role is stopping). */
  readonly signal?: AbortSignal;
}

const systemResolve = async (host: string): Promise<string[]> => (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** A lookup that answers the one address already checked, so the connection goes where the check looked (no DNS rebinding). */
function pinned(address: string): LookupFunction {
  const family = isIP(address);
  return (_host, options, callback) => {
    if (options.all) (callback as unknown as (e: null, all: { address: string; family: number }[]) => void)(null, [{ address, family }]);
    else callback(null, address, family);
  };
}

class Refused extends Error {}

/** The address to connect to: every address the host resolves to must be allowed, else none is used. */
async function checkedAddress(url: URL, options: SendOptions): Promise<string> {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : await (options.resolve ?? systemResolve)(host);
  } catch (error) {
    throw new Refused(`could not resolve ${host}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  if (addresses.length === 0) throw new Refused(`${host} resolves to no address`);
  const refused = addresses.find((address) => !options.allowed.allows(address));
  if (refused !== undefined) throw new Refused(`${isIP(host) ? host : `${host} resolves to ${refused}, which`} is outside PGWARD_WEBHOOK_ALLOWED_NETWORKS; not sent`);
  return addresses[0]!;
}

/**
 * POSTs one delivery: http(s) only, to an address PGWARD_WEBHOOK_ALLOWED_NETWORKS allows, within
 * `timeoutMs` for the whole exchange; redirects are not followed (a 3xx is a failure), and at most
 * MAX_RESPONSE_BYTES of the answer are read.
 */
export async function send(target: string, headers: Record<string, string>, body: string, options: SendOptions): Promise<Attempted> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const url = new URL(target);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { statusCode: null, latencyMs: 0, error: `${url.protocol} is not http or https; not sent` };
  let address: string;
  try {
    address = await checkedAddress(url, options);
  } catch (error) {
    if (error instanceof Refused) return { statusCode: null, latencyMs: elapsed(), error: error.message };
    throw error;
  }
  const payload = Buffer.from(body, 'utf8');
  return new Promise<Attempted>((resolve) => {
    let settled = false;
    const finish = (statusCode: number | null, error: string | null): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ statusCode, latencyMs: elapsed(), error });
    };
    const request = (url.protocol === 'https:' ? https : http).request(url, {
      method: 'POST',
      agent: false,
      lookup: pinned(address),
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(payload.length), 'user-agent': 'pgward-webhooks/1' },
    });
    const timer = setTimeout(() => {
      finish(null, `no answer within ${options.timeoutMs} ms`);
      request.destroy();
    }, options.timeoutMs);
    const abort = (): void => {
      finish(null, 'stopped');
      request.destroy();
    };
    if (options.signal?.aborted) abort();
    options.signal?.addEventListener('abort', abort, { once: true });
    request.on('close', () => options.signal?.removeEventListener('abort', abort));
    request.on('error', (error: NodeJS.ErrnoException) => finish(null, `${error.code ?? 'error'}: ${error.message}`));
    request.on('response', (response) => {
      const status = response.statusCode ?? 0;
      let read = 0;
      const done = (): void => {
        if (status >= 200 && status < 300) finish(status, null);
        else if (status >= 300 && status < 400) finish(status, `redirect not followed (${status})`);
        else finish(status, `the receiver answered ${status}`);
      };
      response.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read > MAX_RESPONSE_BYTES) {
          done();
          response.destroy();
          request.destroy();
        }
      });
      response.on('end', done);
      response.on('error', () => done());
      response.on('close', done);
    });
    request.end(payload);
  });
}
