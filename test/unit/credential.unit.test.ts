import { describe, expect, it } from 'vitest';
import { DomainError } from '../../commands/domain-error.js';
import type { Emit } from '../../commands/handle.js';
import { credential, type CredentialCommand, type CredentialState, type Secrets } from '../../commands/credentials/credential.js';
import type { CatalogEvent } from '../../src/events/catalog.js';
import { CredentialUsed } from '../../src/events/credentials.js';
import { createScramVerifier } from '../../src/crypto/scram.js';
import { displayPrefix, newSecret, sha256Hex } from '../../src/crypto/tokens.js';
import { newId } from '../../src/ids.js';

const NOW = '2030-01-01T12:00:00.000Z';
const LATER = '2030-01-01T13:00:00.000Z';
const credentialId = newId('agt_');

function secrets(): Secrets {
  const token = newSecret('pgw_agt_');
  return { scram: createScramVerifier('password'), token_hash: sha256Hex(token), token_prefix: displayPrefix(token) };
}

function registration(expiresAt: string | null = null): CredentialCommand {
  return {
    kind: 'register',
    credential: {
      credential_id: credentialId,
      project_id: newId('prj_'),
      database_id: newId('db_'),
      policy_profile_id: newId('pol_'),
      name: 'reporting agent',
      pg_username: credentialId,
      principal_type: 'agent',
      ...secrets(),
      expires_at: expiresAt,
    },
  };
}

/** The state after the events `commands` decide in turn, each at `now`; every command must succeed. */
function given(commands: CredentialCommand[], now = NOW): CredentialState {
  let state = credential.initial;
  for (const command of commands) state = apply(state, decided(credential.decide(state, command, now)));
  return state;
}

function decided(result: Emit[] | DomainError): Emit[] {
  if (result instanceof DomainError) throw new Error(`expected events, got ${result.code}: ${result.message}`);
  return result;
}

function apply(state: CredentialState, emits: Emit[]): CredentialState {
  return emits.reduce((current, e) => {
    const event = { type: e.definition.type, data: e.definition.schema.parse(e.data), metadata: {}, stream: `credential-${credentialId}`, revision: current.revision + 1, position: 0n };
    return credential.evolve(current, event as CatalogEvent);
  }, state);
}

function types(result: Emit[] | DomainError): string[] {
  return decided(result).map((e) => e.definition.name);
}

function refusal(result: Emit[] | DomainError): { code: string; message: string } {
  if (!(result instanceof DomainError)) throw new Error(`expected a refusal, got ${result.map((e) => e.definition.name).join(', ') || 'no events'}`);
  return { code: result.code, message: result.message };
}

const disable: CredentialCommand = { kind: 'update', status: 'disabled' };
const enable: CredentialCommand = { kind: 'update', status: 'active' };
const revoke: CredentialCommand = { kind: 'revoke' };
const rotate = (): CredentialCommand => ({ kind: 'rotate', secrets: secrets() });

const active = () => given([registration()]);
const disabled = () => given([registration(), disable]);
const revoked = () => given([registration(), revoke]);
/** Registered to expire at NOW + 1 h, looked at from LATER. */
const expiring = (...more: CredentialCommand[]) => given([registration(LATER), ...more]);

describe('credential transitions (spec §3.1)', () => {
  it('(new) + register → active', () => {
    const result = credential.decide(credential.initial, registration(), NOW);
    expect(types(result)).toEqual(['CredentialRegistered']);
    expect(apply(credential.initial, decided(result))).toMatchObject({ exists: true, status: 'active', secretVersion: 1, revision: 0 });
  });

  it('active + PATCH disabled → disabled', () => {
    const result = credential.decide(active(), disable, NOW);
    expect(types(result)).toEqual(['CredentialDisabled']);
    expect(apply(active(), decided(result)).status).toBe('disabled');
  });

  it('disabled + PATCH active → active', () => {
    const result = credential.decide(disabled(), enable, NOW);
    expect(types(result)).toEqual(['CredentialEnabled']);
    expect(apply(disabled(), decided(result)).status).toBe('active');
  });

  it('PATCH to the status it already has decides nothing', () => {
    expect(types(credential.decide(active(), enable, NOW))).toEqual([]);
    expect(types(credential.decide(disabled(), disable, NOW))).toEqual([]);
  });

  it.each([
    ['active', active],
    ['disabled', disabled],
    ['expired', () => expiring()],
  ])('%s + DELETE → revoked', (_from, state) => {
    const result = credential.decide(state(), revoke, LATER);
    expect(types(result)).toEqual(['CredentialRevoked']);
    expect(apply(state(), decided(result)).status).toBe('revoked');
  });

  it.each([
    ['PATCH active', enable],
    ['PATCH disabled', disable],
    ['rotate', rotate()],
    ['DELETE', revoke],
  ])('revoked + %s → 409 INVALID_STATE', (_trigger, command) => {
    const { code, message } = refusal(credential.decide(revoked(), command, NOW));
    expect(code).toBe('INVALID_STATE');
    expect(message).toMatch(/revoked/);
  });

  it('active + rotate → active, with new secrets and the next secret_version', () => {
    const command = rotate();
    const result = decided(credential.decide(active(), command, NOW));
    expect(types(result)).toEqual(['CredentialRotated']);
    expect(result[0]!.data).toMatchObject({ credential_id: credentialId, secret_version: 2, ...(command.kind === 'rotate' ? command.secrets : {}) });
    const twice = given([registration(), rotate(), rotate()]);
    expect(twice).toMatchObject({ status: 'active', secretVersion: 3 });
  });

  it('disabled + rotate → 409 INVALID_STATE: rotation is defined from active only', () => {
    const { code, message } = refusal(credential.decide(disabled(), rotate(), NOW));
    expect(code).toBe('INVALID_STATE');
    expect(message).toMatch(/active only/);
  });

  it.each([
    ['PATCH active from active', () => expiring(), enable],
    ['PATCH active from disabled', () => expiring(disable), enable],
    ['rotate', () => expiring(), rotate()],
  ])('expired + %s → 409 INVALID_STATE (expired)', (_trigger, state, command) => {
    const { code, message } = refusal(credential.decide(state(), command, LATER));
    expect(code).toBe('INVALID_STATE');
    expect(message).toMatch(/expired/);
  });

  it('expired + PATCH disabled still throws the kill-switch', () => {
    expect(types(credential.decide(expiring(), disable, LATER))).toEqual(['CredentialDisabled']);
  });

  it('expiry is fail-closed at the instant itself', () => {
    expect(refusal(credential.decide(expiring(), rotate(), LATER)).code).toBe('INVALID_STATE');
    expect(types(credential.decide(expiring(), rotate(), '2030-01-01T12:59:59.999Z'))).toEqual(['CredentialRotated']);
  });
});

describe('registration', () => {
  it('refuses an expires_at that is not in the future', () => {
    expect(refusal(credential.decide(credential.initial, registration(NOW), NOW)).code).toBe('INVALID_INPUT');
    expect(refusal(credential.decide(credential.initial, registration('2029-12-31T00:00:00.000Z'), NOW)).code).toBe('INVALID_INPUT');
  });

  it('refuses a second registration on the same stream', () => {
    expect(refusal(credential.decide(active(), registration(), NOW)).code).toBe('RESOURCE_EXISTS');
  });

  it('answers NOT_FOUND for any other command on an empty stream', () => {
    for (const command of [enable, disable, rotate(), revoke, { kind: 'expire' } as const]) {
      expect(refusal(credential.decide(credential.initial, command, NOW)).code).toBe('NOT_FOUND');
    }
  });
});

describe('If-Match', () => {
  it('refuses a stale revision with PRECONDITION_FAILED and accepts the current one', () => {
    const state = disabled();
    expect(state.revision).toBe(1);
    for (const command of [{ kind: 'update', status: 'active', ifRevision: 0 }, { kind: 'rotate', secrets: secrets(), ifRevision: 0 }, { kind: 'revoke', ifRevision: 0 }] as const) {
      expect(refusal(credential.decide(state, command, NOW)).code).toBe('PRECONDITION_FAILED');
    }
    expect(types(credential.decide(state, { kind: 'update', status: 'active', ifRevision: 1 }, NOW))).toEqual(['CredentialEnabled']);
  });

  it('counts CredentialUsed in the revision, as the read model does', () => {
    const used = apply(active(), [{ definition: CredentialUsed, data: { credential_id: credentialId, used_at: NOW } } as Emit]);
    expect(used.revision).toBe(1);
    expect(refusal(credential.decide(used, { kind: 'revoke', ifRevision: 0 }, NOW)).code).toBe('PRECONDITION_FAILED');
  });
});

describe('expiry record', () => {
  it('records CredentialExpired at the expiry instant, once', () => {
    const result = decided(credential.decide(expiring(), { kind: 'expire' }, LATER));
    expect(types(result)).toEqual(['CredentialExpired']);
    expect(result[0]!.data).toEqual({ credential_id: credentialId, expired_at: LATER });
    expect(types(credential.decide(apply(expiring(), result), { kind: 'expire' }, LATER))).toEqual([]);
  });

  it('records nothing for a revoked credential and refuses an unexpired one', () => {
    expect(types(credential.decide(expiring(revoke), { kind: 'expire' }, LATER))).toEqual([]);
    expect(refusal(credential.decide(expiring(), { kind: 'expire' }, NOW)).code).toBe('INVALID_STATE');
    expect(refusal(credential.decide(active(), { kind: 'expire' }, LATER)).code).toBe('INVALID_STATE');
  });
});
