import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/app.js';
import { LOG_EVENTS, logEvent } from '../../src/log-events.js';
import { captureLogs, duplicateKeys } from '../support/logs.js';

describe('duplicateKeys', () => {
  it('finds a key an object holds twice, at any depth, and nothing in a clean line', () => {
    expect(duplicateKeys('{"role":"pgward","a":{"b":1,"b":"x"},"role":"proxy"}')).toEqual(['b', 'role']);
    expect(duplicateKeys('{"a":[{"k":1},{"k":2}],"s":"\\"role\\":1,\\"role\\":2","n":-1.5e3,"t":true,"z":null}')).toEqual([]);
  });
});

describe('the logger (src/logger.ts)', () => {
  it('writes ISO 8601 times, and no key twice through the children serve and its workers make', () => {
    const logs = captureLogs();
    // As src/workers/worker.ts and src/main.ts bind them; the supervisor's own fields besides.
    logs.logger.child({ worker: 'api' }).child({ role: 'proxy' }).info({ session: 's1' }, 'one');
    logs.logger.error({ worker: 'api', worker_pid: 4242, code: 1, signal: null, restart_in_ms: 500 }, 'worker exited; restarting');
    expect(logs.lines).toHaveLength(2);
    for (const line of logs.lines) {
      expect(duplicateKeys(line)).toEqual([]);
      expect((JSON.parse(line) as { time: string }).time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
    expect(JSON.parse(logs.lines[0]!)).toMatchObject({ level: 30, pid: process.pid, worker: 'api', role: 'proxy', session: 's1', msg: 'one' });
  });

  it('redacts secrets wherever they appear', () => {
    const logs = captureLogs();
    logs.logger.info({ password: 'p', secret: 'whsec_x', body: { mcp_token: 't', connection_string: 'postgresql://a:b@c/d', secret: 'whsec_y' }, headers: { authorization: 'Bearer x' } }, 'secrets');
    expect(JSON.parse(logs.lines[0]!)).toMatchObject({ password: '[redacted]', secret: '[redacted]', body: { mcp_token: '[redacted]', connection_string: '[redacted]', secret: '[redacted]' }, headers: { authorization: '[redacted]' } });
  });

  it('writes each security event with its `event` first and at its level', () => {
    const logs = captureLogs();
    for (const event of LOG_EVENTS) logEvent(logs.logger, event, { credential_id: 'cred_1' }, event);
    expect(logs.lines.map((line) => JSON.parse(line) as Record<string, unknown>).map(({ level, event }) => `${String(level)} ${String(event)}`)).toEqual([
      '40 honeytoken_tripped',
      '40 sessions_closed',
      '30 policy_changed',
      '40 budget_exhausted',
      '40 login_refused',
      '40 connection_refused',
      '30 credential_expired',
      '40 upstream_connect_failed',
      '30 upstream_unavailable',
      '40 webhook_failing',
      '40 replica_health_changed',
      '40 anomaly_raised',
    ]);
  });
});

describe('the HTTP app at start', () => {
  it('raises no deprecation warning (FSTDEP022: maxParamLength belongs in routerOptions)', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error & { code?: string }): void => void warnings.push(`${warning.code ?? warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    try {
      const app = await buildApp({ logger: captureLogs().logger, metrics: new Registry(), health: async () => ({}) });
      app.get('/echo/:id', async (request) => (request.params as { id: string }).id.length);
      await app.ready();
      // Past find-my-way's default of 100: the option still reaches the router.
      expect((await app.inject({ method: 'GET', url: `/echo/${'p'.repeat(300)}` })).body).toBe('300');
      await app.close();
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).toEqual([]);
  });
});
