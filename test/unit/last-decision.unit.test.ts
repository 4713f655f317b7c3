import { describe, expect, it } from 'vitest';
import type { CredentialRow } from '../../projections/credentials.js';
import type { PolicyRow } from '../../projections/policies.js';
import { LastAllowed, type DecisionInputs } from '../../proxy/last-decision.js';
import type { HashKey } from '../../proxy/policy/hash-key.js';
import type { StatementDecision } from '../../proxy/policy/hook.js';
import type { UpstreamCatalog } from '../../proxy/policy/upstream-catalog.js';

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
