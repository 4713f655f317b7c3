/** The pure parts of the self-host channel: what a data plane may append and send, its secrets re-sealed, its token's state. */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { enrollmentStatus } from '../../projections/enrollments.js';
import { openSecret, sealSecret, type Keyring } from '../../src/crypto/seal.js';
import { appendRefusal } from '../../src/enroll/appends.js';
import { decisionRefusal } from '../../src/enroll/decision-check.js';
import { resealFor } from '../../src/enroll/reseal.js';
import { dataPlaneKeyring } from '../../src/enroll/token.js';
import { CredentialEnabled, CredentialUsed } from '../../src/events/credentials.js';
import { CachePurged } from '../../src/events/cache.js';
import { DatabaseRegistered, DatabaseUpdated } from '../../src/events/databases.js';
import { decodeWith, encodeEvent, type EventDefinition } from '../../src/events/envelope.js';
import { ProjectHashKeyGenerated } from '../../src/events/projects.js';
import type { RecordedEvent } from '../../src/store/port.js';
import { decision } from '../support/decisions.js';
import { proxyViews } from '../../proxy/views/proxy-views.js';
import { DATA_PLANE_PREFIXES } from '../../src/enroll/wire.js';
import { ProjectStreams } from '../../src/enroll/project-streams.js';

const PRJ = 'prj_01hzzzzzzzzzzzzzzzzzzzzzzz';
const OTHER = 'prj_01hyyyyyyyyyyyyyyyyyyyyyyy';
const AGT = 'agt_01hzzzzzzzzzzzzzzzzzzzzzzz';
const AGT2 = 'agt_01hyyyyyyyyyyyyyyyyyyyyyyy';
const ENR = 'enr_01hzzzzzzzzzzzzzzzzzzzzzzz';
const meta = () => ({ event_id: randomUUID(), correlation_id: 'c', actor: 'proxy:x', at: '2026-11-26T12:00:00.000Z' });
const event = <S extends EventDefinition>(definition: S, data: unknown) => encodeEvent(definition, data as never, meta());
const recorded = (e: ReturnType<typeof event>, stream: string): RecordedEvent => ({ ...e, stream, revision: 0, position: 1n });
const used = (credentialId: string) => event(CredentialUsed, { credential_id: credentialId, used_at: '2026-11-26T12:00:00.000Z' });
const master: Keyring = { current: 'k1', keys: new Map([['k1', Buffer.alloc(32, 7)]]) };

describe('appendRefusal', () => {
  it('lets a proxy record the use of its own project’s credential', () => {
    expect(appendRefusal(`credential-${AGT}`, [used(AGT)], PRJ, 'ours')).toBeUndefined();
  });

  it('refuses another project’s stream, a stream nobody wrote, another credential’s id, and any other event type', () => {
    expect(appendRefusal(`credential-${AGT}`, [used(AGT)], PRJ, 'other')).toMatch(/not this enrollment/);
    expect(appendRefusal(`credential-${AGT}`, [used(AGT)], PRJ, 'none')).toMatch(/only a request for approval/);
    expect(appendRefusal(`credential-${AGT}`, [used(AGT2)], PRJ, 'ours')).toMatch(/credential_id is not the stream's/);
    expect(appendRefusal(`credential-${AGT}`, [event(CredentialEnabled, { credential_id: AGT })], PRJ, 'ours')).toMatch(/may not append CredentialEnabled/);
    expect(appendRefusal(`policy-${AGT}`, [used(AGT)], PRJ, 'ours')).toMatch(/belongs in a credential- stream/);
    expect(appendRefusal(`credential-${AGT}`, [used(AGT), event(CredentialEnabled, { credential_id: AGT })], PRJ, 'ours')).toMatch(/^event 1:/);
  });

  it('refuses a payload its schema refuses, with nothing thrown', () => {
    const bad = { ...used(AGT), data: new TextEncoder().encode('{"credential_id":"agt_x"}') };
    expect(appendRefusal(`credential-${AGT}`, [bad], PRJ, 'ours')).toMatch(/^event 0:/);
    expect(appendRefusal(`credential-${AGT}`, [{ ...bad, data: new TextEncoder().encode('not json') }], PRJ, 'ours')).toMatch(/^event 0:/);
  });
});

describe('decisionRefusal', () => {
  const own = (projectId = PRJ, proxyId = `${ENR}:host-1`) => ({ ...fc.sample(decision.filter((d) => d.proxy_id !== null), { numRuns: 1, seed: 3 })[0]!, project_id: projectId, proxy_id: proxyId });
  const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

  it('takes a decision, a batch and a gap of its own', () => {
    expect(decisionRefusal(bytes({ kind: 'decision', decision: own() }), PRJ, ENR)).toBeUndefined();
    expect(decisionRefusal(bytes({ kind: 'batch', decisions: [own(), own()] }), PRJ, ENR)).toBeUndefined();
    expect(decisionRefusal(bytes({ kind: 'gap', project_id: PRJ, proxy_id: `${ENR}:h`, boot_epoch: 1, from_seq: '1', to_seq: '2', count: '2', reason: 'r', ts: 'x' }), PRJ, ENR)).toBeUndefined();
  });

  it('refuses one foreign decision in a batch, another proxy, a proxy id that only starts like the enrollment’s, a foreign gap, and what is not a record', () => {
    expect(decisionRefusal(bytes({ kind: 'batch', decisions: [own(), own(OTHER)] }), PRJ, ENR)).toMatch(/^decision 1: names project/);
    expect(decisionRefusal(bytes({ kind: 'decision', decision: own(PRJ, 'proxy-a') }), PRJ, ENR)).toMatch(/proxy_id must start/);
    expect(decisionRefusal(bytes({ kind: 'decision', decision: own(PRJ, `${ENR}x:h`) }), PRJ, ENR)).toMatch(/proxy_id must start/);
    expect(decisionRefusal(bytes({ kind: 'gap', project_id: OTHER, proxy_id: `${ENR}:h` }), PRJ, ENR)).toMatch(/gap must name/);
    expect(decisionRefusal(bytes({ kind: 'decision', decision: { ...own(), seq: 'x' } }), PRJ, ENR)).toMatch(/^decision 0:/);
    for (const value of [null, 1, 'decision', { kind: 'other' }, { kind: 'batch', decisions: 'x' }]) expect(decisionRefusal(bytes(value), PRJ, ENR)).toMatch(/expected a decision/);
    expect(decisionRefusal(new TextEncoder().encode('{'), PRJ, ENR)).toBe('the message is not JSON');
  });
});

describe('decisionRefusal of session marks', () => {
  const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
  const proxy = `${ENR}:host-1`;
  const mark = (projectId = PRJ, sessionId = `${proxy}.7.1`) => ({ phase: 'opened', project_id: projectId, session_id: sessionId, credential_id: AGT, at: '2026-11-26T12:00:00.000Z' });
  const sessions = (proxyId: string, ...marks: unknown[]) => bytes({ kind: 'sessions', proxy_id: proxyId, boot_epoch: 7, sessions: marks });

  it('takes its own proxy’s marks of its project, and refuses another project’s, another proxy’s and another proxy’s sessions', () => {
    expect(decisionRefusal(sessions(proxy, mark(), { ...mark(), phase: 'closed' }), PRJ, ENR)).toBeUndefined();
    expect(decisionRefusal(sessions(proxy, mark(), mark(OTHER)), PRJ, ENR)).toMatch(/must name this enrollment’s project/);
    expect(decisionRefusal(sessions('proxy-a', mark(PRJ, 'proxy-a.7.1')), PRJ, ENR)).toMatch(/must name this enrollment’s project and one of its proxies/);
    expect(decisionRefusal(sessions(proxy, mark(PRJ, 'proxy-a.7.1')), PRJ, ENR)).toMatch(/^sessions: .*only its own sessions/s);
    expect(decisionRefusal(sessions(proxy, { ...mark(), phase: 'paused' }), PRJ, ENR)).toMatch(/^sessions:/);
  });
});

describe('resealFor', () => {
  const registered = (password: string) =>
    recorded(
      event(DatabaseRegistered, {
        database_id: 'db_01hzzzzzzzzzzzzzzzzzzzzzzz',
        project_id: PRJ,
        host: 'h',
        port: 5432,
        name: 'n',
        username: 'u',
        password: sealSecret(password, master, 'db_01hzzzzzzzzzzzzzzzzzzzzzzz'),
        ssl_mode: 'disable',
        role: 'primary',
        pool_config: { mode: 'transaction', max_connections: 10, min_connections: 0, idle_timeout_ms: 60_000, acquire_timeout_ms: 5_000 },
        cache_config: { enabled: true, ttl_seconds: 60, max_entries: 10_000, swr_seconds: 30 },
        pool_region: '',
        auto_read_routing: false,
        query_timeout_ms: 0,
      }),
      `project-${PRJ}`,
    );

  it('re-seals an upstream password for the data plane’s token: it opens there to the same text, and not with the master key', () => {
    const token = `pgw_enr_${'a'.repeat(43)}`;
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 200 }).filter((s) => !s.includes('\0') && Buffer.from(s).toString() === s), (password) => {
        const out = resealFor(registered(password), master, dataPlaneKeyring(token));
        const { data } = decodeWith(DatabaseRegistered, out);
        expect(openSecret(data.password, dataPlaneKeyring(token), data.database_id)).toBe(password);
        expect(() => openSecret(data.password, master, data.database_id)).toThrow();
        expect(() => openSecret(data.password, dataPlaneKeyring(`pgw_enr_${'b'.repeat(43)}`), data.database_id)).toThrow();
      }),
      { numRuns: 30 },
    );
  });

  it('re-seals a password change and the hash-mask key; passes other events byte for byte', () => {
    const to = dataPlaneKeyring(`pgw_enr_${'c'.repeat(43)}`);
    const updated = recorded(event(DatabaseUpdated, { database_id: 'db_01hzzzzzzzzzzzzzzzzzzzzzzz', changes: { password: sealSecret('new', master, 'db_01hzzzzzzzzzzzzzzzzzzzzzzz') } }), `project-${PRJ}`);
    expect(openSecret(decodeWith(DatabaseUpdated, resealFor(updated, master, to)).data.changes.password!, to, 'db_01hzzzzzzzzzzzzzzzzzzzzzzz')).toBe('new');
    const key = recorded(event(ProjectHashKeyGenerated, { project_id: PRJ, key: sealSecret('ab'.repeat(32), master, `hash-key:${PRJ}`) }), `hashkey-${PRJ}`);
    expect(openSecret(decodeWith(ProjectHashKeyGenerated, resealFor(key, master, to)).data.key, to, `hash-key:${PRJ}`)).toBe('ab'.repeat(32));
    const renamed = recorded(event(DatabaseUpdated, { database_id: 'db_01hzzzzzzzzzzzzzzzzzzzzzzz', changes: { port: 6543 } }), `project-${PRJ}`);
    expect(resealFor(renamed, master, to)).toBe(renamed);
    const other = recorded(used(AGT), `credential-${AGT}`);
    expect(resealFor(other, master, to)).toBe(other);
  });
});

describe('enrollment status and keys', () => {
  it('is revoked before expired, expired from expires_at on', () => {
    const now = new Date('2026-11-26T12:00:00.000Z');
    expect(enrollmentStatus({ revoked_at: null, expires_at: null }, now)).toBe('active');
    expect(enrollmentStatus({ revoked_at: null, expires_at: '2026-11-26T12:00:00.001Z' }, now)).toBe('active');
    expect(enrollmentStatus({ revoked_at: null, expires_at: '2026-11-26T12:00:00.000Z' }, now)).toBe('expired');
    expect(enrollmentStatus({ revoked_at: '2026-11-26T11:00:00.000Z', expires_at: '2026-11-26T11:30:00.000Z' }, now)).toBe('revoked');
  });

  it('derives one key per token', () => {
    const a = dataPlaneKeyring(`pgw_enr_${'a'.repeat(43)}`);
    expect(dataPlaneKeyring(`pgw_enr_${'a'.repeat(43)}`).keys.get('enrollment')).toEqual(a.keys.get('enrollment'));
    expect(dataPlaneKeyring(`pgw_enr_${'b'.repeat(43)}`).keys.get('enrollment')).not.toEqual(a.keys.get('enrollment'));
    expect(a.keys.get('enrollment')).toHaveLength(32);
  });
});

describe('the data plane channel', () => {
  it('serves every stream category the proxy’s live views fold, each owned by one project', async () => {
    const noStore = { readAll: () => Promise.resolve([]), subscribe: () => { throw new Error('not started'); }, readStream: () => Promise.resolve([]) };
    const folded = new Set(proxyViews(noStore as never).all.map((view) => view.streamPrefix));
    expect([...folded].filter((prefix) => !(DATA_PLANE_PREFIXES as readonly string[]).includes(prefix))).toEqual([]);
    const streams = new ProjectStreams(noStore as never, PRJ, 'org_01hzzzzzzzzzzzzzzzzzzzzzzz');
    expect(await streams.owns(`iprules-${PRJ}`)).toBe(true);
    expect(await streams.owns(`iprules-${OTHER}`)).toBe(false);
  });

  it('shows a database’s cache stream (rules, purges) to the project its first event names only', async () => {
    const purged = (project: string): RecordedEvent => {
      const event = encodeEvent(CachePurged, { project_id: project, database_id: 'db_01hzzzzzzzzzzzzzzzzzzzzzzz' }, { event_id: randomUUID(), correlation_id: 'c', actor: 'a', at: '2026-11-26T12:00:00.000Z' });
      return { ...event, stream: `cache-db_${project.slice(4)}`, revision: 0, position: 1n } as RecordedEvent;
    };
    const ours = purged(PRJ);
    const theirs = purged(OTHER);
    const store = { readStream: (stream: string) => Promise.resolve([ours, theirs].filter((event) => event.stream === stream)) };
    const streams = new ProjectStreams(store as never, PRJ, 'org_01hzzzzzzzzzzzzzzzzzzzzzzz');
    expect(await streams.shows(ours)).toBe(true);
    expect(await streams.shows(theirs)).toBe(false);
    expect(await streams.whose(theirs.stream)).toBe('other');
  });
});
