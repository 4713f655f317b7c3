import { beforeAll, describe, expect, it } from 'vitest';
import type { CredentialRow } from '../../projections/credentials.js';
import type { PolicyRow } from '../../projections/policies.js';
import { LastAllowed, type DecisionInputs } from '../../proxy/last-decision.js';
import type { HashKey } from '../../proxy/policy/hash-key.js';
import type { StatementDecision } from '../../proxy/policy/hook.js';
import { loadParser } from '../../proxy/policy/parser.js';
import type { UpstreamCatalog } from '../../proxy/policy/upstream-catalog.js';
import type { SessionHost } from '../../proxy/session-host.js';
import { StatementGate } from '../../proxy/statement-gate.js';
import { catalogFromRows } from '../../proxy/upstream/catalog-query.js';
import { decideWithCatalog } from '../../proxy/upstream/catalog-snapshot.js';

const policy = { policy_id: 'pol_1', revision: 1, honeytokens: [] } as unknown as PolicyRow;
const credential = { credential_id: 'cred_1' } as CredentialRow;
const honeytokens = { canariesOf: () => [], tripped: () => undefined };
const inputs: DecisionInputs = { credential, policy, protocol: 'extended', honeytokens, hashKey: undefined, sessionValues: { credential_id: 'cred_1', project_id: 'prj_1' }, sandboxed: false };
const catalog = { version: 'v1' } as UpstreamCatalog;
const allowed = { action: 'allow', sql: 'select 1' } as StatementDecision;
const refused = { action: 'refuse', rule: 'tables.not_allowed' } as StatementDecision;

describe('LastAllowed', () => {
  it('gives back the last allowed decision for the same text on the very same inputs', () => {
    const last = new LastAllowed();
    expect(last.of('select 1', inputs, catalog)).toBeUndefined();
    expect(last.keep('select 1', inputs, catalog, allowed)).toBe(allowed);
    expect(last.of('select 1', { ...inputs }, catalog)).toBe(allowed);
    expect(last.of('select 2', inputs, catalog)).toBeUndefined();
  });

  it('answers nothing once any input differs from what the decision was made on', () => {
    const last = new LastAllowed();
    last.keep('select 1', inputs, catalog, allowed);
    const changed: readonly DecisionInputs[] = [
      { ...inputs, policy: { ...policy } },
      { ...inputs, credential: { ...credential } },
      { ...inputs, protocol: 'simple' },
      { ...inputs, hashKey: {} as HashKey },
      { ...inputs, sessionValues: { credential_id: 'cred_1', project_id: 'prj_1' } },
      { ...inputs, sandboxed: true },
      { ...inputs, honeytokens: { ...honeytokens } },
    ];
    for (const other of changed) expect(last.of('select 1', other, catalog)).toBeUndefined();
    expect(last.of('select 1', inputs, { version: 'v1' } as UpstreamCatalog)).toBeUndefined();
  });

  it('answers nothing once its policy row changed revision in place', () => {
    const row = { ...policy } as PolicyRow;
    const last = new LastAllowed();
    last.keep('select 1', { ...inputs, policy: row }, catalog, allowed);
    row.revision = 2;
    expect(last.of('select 1', { ...inputs, policy: row }, catalog)).toBeUndefined();
  });

  it('keeps no refusal, and nothing decided under a policy that plants honeytokens', () => {
    const last = new LastAllowed();
    expect(last.keep('select 1', inputs, catalog, refused)).toBe(refused);
    expect(last.of('select 1', inputs, catalog)).toBeUndefined();
    const planted = { ...inputs, policy: { ...policy, honeytokens: ['hnt_1'] } };
    expect(last.keep('select 1', planted, catalog, allowed)).toBe(allowed);
    expect(last.of('select 1', planted, catalog)).toBeUndefined();
    expect(last.keep('select 1', { ...inputs, policy: undefined }, catalog, allowed)).toBe(allowed);
    expect(last.of('select 1', { ...inputs, policy: undefined }, catalog)).toBeUndefined();
  });
});

describe('StatementGate.decideOn', () => {
  beforeAll(loadParser);

  const rows: [string, string][] = [['r', '["public", "orders", "r", ["id", "total"], [], [], false, [], [], false, [], []]']];
  const active = { policy_id: 'pol_1', project_id: 'prj_1', status: 'active', revision: 1, read_only: true, allowed_tables: ['public.*'], masked_columns: {}, row_filters: {}, honeytokens: [], max_rows: null, statement_allow: null, statement_deny: [], denied_tables: [], migration_safety: 'off', max_affected_rows: null, write_mode: 'commit', allow_catalog: false } as unknown as PolicyRow;

  /** A gate over a host with what a decision reads, and how many times the policy engine ran (it asks for the canaries each time). */
  function gateOf() {
    const engine = { runs: 0 };
    const snapshot = catalogFromRows(rows);
    const host = {
      context: { honeytokens: { canariesOf: () => (engine.runs++, []), tripped: () => undefined }, hashKeys: { forPolicy: () => undefined } },
      sessionValues: { credential_id: 'cred_1', project_id: 'prj_1' },
      upstream: { handle: undefined },
      catalog: { current: () => snapshot },
    } as unknown as SessionHost;
    return { gate: new StatementGate(host, undefined as never, undefined as never), engine, host };
  }

  it('runs the policy engine once for a statement decided again and again on the same inputs, with its decision', () => {
    const { gate, engine, host } = gateOf();
    const first = gate.decideOn('select total from orders where id = $1', credential, active, 'extended');
    expect(first.action).toBe('allow');
    expect(gate.decideOn('select total from orders where id = $1', credential, active, 'extended')).toBe(first);
    expect(gate.decideOn('select total from orders where id = $1', credential, active, 'extended')).toBe(first);
    expect(engine.runs).toBe(1);
    const inputs = { credential, policy: active, protocol: 'extended' as const, honeytokens: host.context.honeytokens, sessionValues: host.sessionValues, sandboxed: false };
    expect(decideWithCatalog('select total from orders where id = $1', inputs, host.catalog!.current())).toEqual(first);
  });

  it('runs it again for another text, another policy row, and every time under a policy with honeytokens or for a refusal', () => {
    const { gate, engine } = gateOf();
    gate.decideOn('select total from orders where id = $1', credential, active, 'extended');
    gate.decideOn('select id from orders', credential, active, 'extended');
    gate.decideOn('select id from orders', credential, { ...active }, 'extended');
    expect(engine.runs).toBe(3);
    const planted = { ...active, honeytokens: ['hnt_1'] };
    gate.decideOn('select id from orders', credential, planted, 'extended');
    gate.decideOn('select id from orders', credential, planted, 'extended');
    expect(engine.runs).toBe(5);
    expect(gate.decideOn('delete from orders', credential, active, 'extended').action).toBe('refuse');
    gate.decideOn('delete from orders', credential, active, 'extended');
    expect(engine.runs).toBe(7);
  });
});
