import type { CredentialRow } from '../projections/credentials.js';
import { mockVerifier, parseClientFirst, serverFirst, verifyClientFinal, type ScramSession } from '../src/crypto/scram.js';
import type { ScramVerifier } from '../src/events/fields.js';
import type { AuditEventKind } from '../src/events/audit.js';
import {
  encodeAuthenticationOk,
  encodeAuthenticationSaslContinue,
  encodeAuthenticationSaslFinal,
  encodeBackendKeyData,
  encodeParameterStatus,
  encodeReadyForQuery,
  type ErrorFields,
} from './protocol/backend.js';
import { decodeSaslInitialResponse, decodeSaslResponse } from './protocol/frontend.js';

export const AUTH_FAILED: ErrorFields = { severity: 'FATAL', code: '28P01', message: 'password authentication failed' };

/**
 * One SCRAM-SHA-256 exchange against the credential's verifier, or, for a user with no credential,
 * a stable fake one: an unknown user goes through the same steps and fails only at the proof.
 */
export class ScramExchange {
  private session: ScramSession | undefined;
  private readonly verifier: ScramVerifier;

  constructor(credential: CredentialRow | undefined, user: string, mockSecret: Buffer) {
    this.verifier = credential?.scram ?? mockVerifier(user, mockSecret);
  }

  /** The server-first message answering the client's SASLInitialResponse; undefined when it asks for another mechanism. */
  first(body: Buffer): Buffer | undefined {
    const initial = decodeSaslInitialResponse(body);
    if (initial.mechanism !== 'SCRAM-SHA-256' || !initial.data) return undefined;
    const first = serverFirst(parseClientFirst(initial.data.toString('utf8')), this.verifier);
    this.session = first.session;
    return encodeAuthenticationSaslContinue(first.message);
  }

  /** The server-final message when the client's proof holds; undefined when it does not. */
  final(body: Buffer): string | undefined {
    const result = verifyClientFinal(this.session!, decodeSaslResponse(body).toString('utf8'));
    return result.ok ? result.serverFinal : undefined;
  }
}

/** Why the credential cannot be used now, or undefined when it can. */
export function unusable(credential: CredentialRow): { event: AuditEventKind; reason: string } | undefined {
  if (credential.status !== 'active') return { event: 'auth_failed', reason: `credential is ${credential.status}` };
  if (credential.expires_at && Date.parse(credential.expires_at) <= Date.now()) return { event: 'credential_expired', reason: 'credential is past its expires_at' };
  return undefined;
}

/** What a completed login sends the client, in one write: SASL final, AuthenticationOk, the server's parameters, the cancel key, ReadyForQuery. */
export function loginReply(serverFinal: string, parameters: ReadonlyMap<string, string>, processId: number, secretKey: Buffer): Buffer {
  const out: Buffer[] = [encodeAuthenticationSaslFinal(serverFinal), encodeAuthenticationOk()];
  for (const [name, value] of parameters) out.push(encodeParameterStatus(name, value));
  out.push(encodeBackendKeyData(processId, secretKey), encodeReadyForQuery('I'));
  return Buffer.concat(out);
}
