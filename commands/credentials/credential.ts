import type { z } from 'zod';
import type { CatalogEvent } from '../../src/events/catalog.js';
import {
  CredentialDisabled,
  CredentialEnabled,
  CredentialExpired,
  CredentialIpRulesSet,
  CredentialRegistered,
  CredentialRenamed,
  CredentialRevoked,
  CredentialRotated,
  CredentialUsed,
} from '../../src/events/credentials.js';
import type { IpRuleLists } from '../../src/net/ip-rules.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate, type Emit } from '../handle.js';

export type CredentialStatus = 'active' | 'disabled' | 'revoked';

/**
 * One agent credential per stream (`credential-<id>`). `revision` counts every event of the
 * stream, CredentialUsed included, so it equals the read model's revision: the ETag.
 */
export interface CredentialState {
  readonly exists: boolean;
  readonly credentialId?: string;
  readonly name: string;
  readonly status: CredentialStatus;
  readonly expiresAt: string | null;
  /** A CredentialExpired event is on the stream. */
  readonly expiryRecorded: boolean;
  readonly secretVersion: number;
  readonly ipRules: IpRuleLists;
  readonly revision: number;
}

type Registration = z.input<typeof CredentialRegistered.schema>;
export type Secrets = Pick<Registration, 'scram' | 'token_hash' | 'token_prefix'>;

export type CredentialCommand =
  | { readonly kind: 'register'; readonly credential: Registration }
  /** A PATCH: a new label, the kill-switch, or both; `reason` is recorded when it disables. */
  | { readonly kind: 'update'; readonly name?: string; readonly status?: 'active' | 'disabled'; readonly ipRules?: IpRuleLists; readonly reason?: string; readonly ifRevision?: number }
  | { readonly kind: 'rotate'; readonly secrets: Secrets; readonly ifRevision?: number }
  | { readonly kind: 'revoke'; readonly ifRevision?: number }
  | { readonly kind: 'expire' };

function evolve(state: CredentialState, event: CatalogEvent): CredentialState {
  const next = { ...state, revision: event.revision };
  switch (event.type) {
    case CredentialRegistered.type:
      return { ...next, exists: true, credentialId: event.data.credential_id, name: event.data.name, status: 'active', expiresAt: event.data.expires_at, secretVersion: 1 };
    case CredentialRotated.type:
      return { ...next, secretVersion: event.data.secret_version };
    case CredentialRenamed.type:
      return { ...next, name: event.data.name };
    case CredentialDisabled.type:
      return { ...next, status: 'disabled' };
    case CredentialEnabled.type:
      return { ...next, status: 'active' };
    case CredentialRevoked.type:
      return { ...next, status: 'revoked' };
    case CredentialExpired.type:
      return { ...next, expiryRecorded: true };
    case CredentialIpRulesSet.type:
      return { ...next, ipRules: { allow: event.data.allow, deny: event.data.deny } };
    case CredentialUsed.type:
      return next;
    default:
      return state;
  }
}

/** Fail-closed expiry: unusable from the instant expires_at passes, whether or not a sweep recorded it. */
export function isExpired(expiresAt: string | null, now: string): boolean {
  return expiresAt !== null && Date.parse(expiresAt) <= Date.parse(now);
}

function precondition(state: CredentialState, expected: number | undefined): DomainError | undefined {
  if (expected !== undefined && expected !== state.revision) {
    return new DomainError('PRECONDITION_FAILED', `the credential is at revision ${state.revision}, not ${expected}: fetch it again and retry with its ETag`);
  }
  return undefined;
}

function refusedWhenRevoked(state: CredentialState, what: string): DomainError | undefined {
  return state.status === 'revoked' ? new DomainError('INVALID_STATE', `the credential is revoked, which is permanent: it cannot be ${what}; register a new one`) : undefined;
}

function refusedWhenExpired(state: CredentialState, what: string, now: string): DomainError | undefined {
  return isExpired(state.expiresAt, now) ? new DomainError('INVALID_STATE', `the credential expired at ${state.expiresAt}: it cannot be ${what}; register a new one`) : undefined;
}

/** The kill-switch. Asking for the state the credential is already in decides nothing: 200, no event. */
function setStatus(state: CredentialState, target: 'active' | 'disabled', reason: string, now: string): Emit[] | DomainError {
  const refused = refusedWhenRevoked(state, 're-enabled or disabled') ?? (target === 'active' ? refusedWhenExpired(state, 're-enabled', now) : undefined);
  if (refused) return refused;
  if (state.status === target) return [];
  const credentialId = state.credentialId!;
  return target === 'disabled' ? [emit(CredentialDisabled, { credential_id: credentialId, reason })] : [emit(CredentialEnabled, { credential_id: credentialId })];
}

/** A new label; the label it already has decides nothing. */
function rename(state: CredentialState, name: string): Emit[] | DomainError {
  const refused = refusedWhenRevoked(state, 'renamed');
  if (refused) return refused;
  return state.name === name ? [] : [emit(CredentialRenamed, { credential_id: state.credentialId!, name })];
}

/** The credential's own IP rules replaced; the rules it already has decide nothing. */
function setIpRules(state: CredentialState, rules: IpRuleLists): Emit[] | DomainError {
  const refused = refusedWhenRevoked(state, 'given IP rules');
  if (refused) return refused;
  if (JSON.stringify([rules.allow, rules.deny]) === JSON.stringify([state.ipRules.allow, state.ipRules.deny])) return [];
  return [emit(CredentialIpRulesSet, { credential_id: state.credentialId!, allow: [...rules.allow], deny: [...rules.deny] })];
}

type Update = Extract<CredentialCommand, { kind: 'update' }>;

/** The parts of a PATCH decide together: any refusal refuses the whole request. */
function update(state: CredentialState, command: Update, now: string): Emit[] | DomainError {
  const parts = [
    command.name === undefined ? [] : rename(state, command.name),
    command.ipRules === undefined ? [] : setIpRules(state, command.ipRules),
    command.status === undefined ? [] : setStatus(state, command.status, command.reason ?? '', now),
  ];
  return parts.find((part) => part instanceof DomainError) ?? parts.flatMap((part) => (part instanceof DomainError ? [] : part));
}

function rotate(state: CredentialState, secrets: Secrets, now: string): Emit[] | DomainError {
  const refused = refusedWhenRevoked(state, 'rotated') ?? refusedWhenExpired(state, 'rotated', now);
  if (refused) return refused;
  if (state.status === 'disabled') {
    return new DomainError('INVALID_STATE', 'the credential is disabled: rotation is defined from active only (spec §3.1); enable it first, then rotate');
  }
  return [emit(CredentialRotated, { credential_id: state.credentialId!, ...secrets, secret_version: state.secretVersion + 1 })];
}

/** Records a passed expiry once; a revoked credential needs no record, and an unexpired one cannot get one. */
function expire(state: CredentialState, now: string): Emit[] | DomainError {
  if (state.expiryRecorded || state.status === 'revoked') return [];
  if (!isExpired(state.expiresAt, now)) return new DomainError('INVALID_STATE', 'the credential has not expired');
  return [emit(CredentialExpired, { credential_id: state.credentialId!, expired_at: state.expiresAt! })];
}

function decide(state: CredentialState, command: CredentialCommand, now: string): Emit[] | DomainError {
  if (command.kind === 'register') {
    if (state.exists) return new DomainError('RESOURCE_EXISTS', `credential ${command.credential.credential_id} already exists`);
    if (isExpired(command.credential.expires_at, now)) return new DomainError('INVALID_INPUT', 'expires_at must be in the future');
    return [emit(CredentialRegistered, command.credential)];
  }
  if (!state.exists) return new DomainError('NOT_FOUND', 'credential not found');
  switch (command.kind) {
    case 'update':
      return precondition(state, command.ifRevision) ?? update(state, command, now);
    case 'rotate':
      return precondition(state, command.ifRevision) ?? rotate(state, command.secrets, now);
    case 'revoke':
      return (
        precondition(state, command.ifRevision) ??
        refusedWhenRevoked(state, 'revoked again') ?? [emit(CredentialRevoked, { credential_id: state.credentialId!, reason: '' })]
      );
    case 'expire':
      return expire(state, now);
  }
}

export const credential: Aggregate<CredentialState, CredentialCommand> = {
  initial: { exists: false, name: '', status: 'active', expiresAt: null, expiryRecorded: false, secretVersion: 0, ipRules: { allow: [], deny: [] }, revision: -1 },
  evolve,
  decide,
};
