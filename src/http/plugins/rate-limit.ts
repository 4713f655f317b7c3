import type { FastifyInstance, FastifyReply } from 'fastify';
import { Problem } from '../problem.js';
import { requestPath } from './auth.js';

export interface RateLimits {
  /** Requests per window for one credential. */
  perCredential: number;
  /** Requests per window from one client address, authenticated or not. */
  perAddress: number;
  windowSeconds: number;
}

interface Window {
  count: number;
  resetAt: number;
}

/** Fixed-window counters in memory; each process limits what it serves. */
class Counters {
  private readonly windows = new Map<string, Window>();
  private sweptAt = 0;

  constructor(private readonly windowMs: number) {}

  hit(key: string, now: number): Window {
    if (now - this.sweptAt > this.windowMs) {
      for (const [k, w] of this.windows) if (w.resetAt <= now) this.windows.delete(k);
      this.sweptAt = now;
    }
    let window = this.windows.get(key);
    if (!window || window.resetAt <= now) {
      window = { count: 0, resetAt: now + this.windowMs };
      this.windows.set(key, window);
    }
    window.count++;
    return window;
  }
}

function announce(reply: FastifyReply, limit: number, window: Window, now: number): number {
  const reset = Math.max(1, Math.ceil((window.resetAt - now) / 1000));
  void reply.header('ratelimit', `limit=${limit}, remaining=${Math.max(0, limit - window.count)}, reset=${reset}`);
  return reset;
}

/** Counts a request of `key` against `limit` per window: 429 RATE_LIMITED with Retry-After and RateLimit once spent (spec §7). */
export type LimitCheck = (reply: FastifyReply, key: string, limit: number, what: string) => void;

export function fixedWindowLimiter(windowSeconds: number): LimitCheck {
  const counters = new Counters(windowSeconds * 1000);
  return (reply, key, limit, what) => {
    const now = Date.now();
    const window = counters.hit(key, now);
    const reset = announce(reply, limit, window, now);
    if (window.count > limit) {
      throw new Problem('RATE_LIMITED', `the ${what} made more than ${limit} requests in ${windowSeconds} s; retry in ${reset} s`, { headers: { 'retry-after': String(reset) } });
    }
  };
}

/** Limits every /v1 request per client address, and every authenticated one per credential. */
export function installRateLimit(app: FastifyInstance, limits: RateLimits): void {
  const check = fixedWindowLimiter(limits.windowSeconds);
  app.addHook('onRequest', async (request, reply) => {
    if (requestPath(request).startsWith('/v1/')) check(reply, `ip:${request.ip}`, limits.perAddress, 'address');
  });
  app.addHook('preValidation', async (request, reply) => {
    const caller = request.caller;
    if (request.operator) check(reply, `operator:${request.operator.name}`, limits.perCredential, 'credential');
    if (!caller) return;
    const id = caller.kind === 'api_key' ? caller.keyId : `${caller.orgId}:${caller.subject}`;
    check(reply, `credential:${id}`, limits.perCredential, 'credential');
  });
}
