/**
 * DailyUsage's connection_seconds from the proxy's connection accounting: a real node-postgres
 * session through the proxy, its open and close recorded through the decision bus by ingest, the
 * daily usage read through the API over PostgreSQL.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectionStream } from '../../projections/connections.js';
import { startIngest, type RunningIngest } from '../../src/ingest/ingest.js';
import { startGateway, type TestGateway } from '../support/gateway.js';
import { openSession, waitFor } from '../support/wire.js';

let gateway: TestGateway;
let ingest: RunningIngest;

beforeAll(async () => {
  gateway = await startGateway('connection_seconds');
  ingest = await startIngest({ store: gateway.api.store, bus: gateway.bus, logger: pino({ level: 'silent' }), holeGraceMs: 200 });
});
afterAll(async () => {
  await ingest?.stop();
  await gateway?.stop();
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Today's and yesterday's connection seconds together: a session near midnight counts on both. */
async function connectionSeconds(): Promise<number> {
  const response = await gateway.api.call(gateway.owner.apiKey, { method: 'GET', url: `/v1/orgs/${gateway.owner.orgId}/usage/daily?days=2` });
  expect(response.statusCode, response.body).toBe(200);
  return (response.json() as { days: { connection_seconds: number }[] }).days.reduce((sum, day) => sum + day.connection_seconds, 0);
}

describe('connection_seconds', () => {
  it('counts a wire session from connect to disconnect, also the time before its first statement and after its last', async () => {
    const agent = await gateway.register('idle agent');
    const connectedAt = Date.now();
    const { client } = await openSession(agent.connection_string);
    await pause(1_500);
    expect((await client.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
    await pause(1_500);
    await client.end();
    const held = (Date.now() - connectedAt) / 1000;

    // One statement: its first and last decision are the same moment, which counted 0 seconds before the proxy recorded connections.
    await waitFor(async () => (await gateway.api.store.readStream(connectionStream(gateway.projectId))).length === 2, 10_000, 'the close recorded');
    let seconds = 0;
    await waitFor(async () => (seconds = await connectionSeconds()) >= 3, 10_000, `3 connection seconds (last read ${seconds})`);
    expect(seconds).toBeLessThanOrEqual(held);

    // The marks went through the bus and ingest, one each, and name the session of the decision.
    const [decision] = await gateway.decisionsOf(agent.credential.id, 1);
    const events = await gateway.api.store.readStream(connectionStream(gateway.projectId));
    expect(events.map((event) => event.type)).toEqual(['WireSessionOpened.v1', 'WireSessionClosed.v1']);
    const marks = gateway.sessionMarks.filter((mark) => mark.credential_id === agent.credential.id);
    expect(marks.map((mark) => [mark.phase, mark.session_id])).toEqual([['opened', decision!.session_id], ['closed', decision!.session_id]]);
    expect(Date.parse(marks[1]!.at as string) - Date.parse(marks[0]!.at as string)).toBeGreaterThanOrEqual(3_000);
  });

  it('records no connection for a login that failed', async () => {
    const agent = await gateway.register('wrong password');
    const url = new URL(agent.connection_string);
    url.password = 'not-the-password';
    const before = gateway.sessionMarks.length;
    await expect(openSession(url.toString())).rejects.toThrow(/password authentication failed|wrong password/);
    await gateway.decisionsOf(agent.credential.id, 1).catch(() => undefined);
    await pause(200);
    expect(gateway.sessionMarks.slice(before)).toEqual([]);
  });
});
