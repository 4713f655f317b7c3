import type { FastifyBaseLogger } from 'fastify';
import type pg from 'pg';
import { disableForHoneytoken } from '../../../commands/credentials/disable-for-honeytoken.js';
import type { PolicyRow } from '../../../projections/policies.js';
import type { HoneytokenRow } from '../../../projections/honeytokens.js';
import { LiveHoneytokens } from '../../../proxy/honeytokens.js';
import type { Honeytokens } from '../../../proxy/policy/hook.js';
import type { TokenCredential } from '../../../queries/credentials.js';
import { honeytokensById } from '../../../queries/honeytokens.js';
import type { EventStore } from '../../store/port.js';

/**
 * The policy's honeytokens for one request, read from the read model, checked exactly as the
 * proxy checks them; a trip of one that says so disables the credential.
 */
export async function requestHoneytokens(pool: pg.Pool, store: EventStore, policy: PolicyRow | undefined, correlationId: string, log: FastifyBaseLogger): Promise<Honeytokens<TokenCredential>> {
  const rows = policy && policy.honeytokens.length > 0 ? await honeytokensById(pool, policy.project_id, policy.honeytokens) : new Map<string, HoneytokenRow>();
  return new LiveHoneytokens<TokenCredential>(rows, (credential, honeytoken) => {
    disableForHoneytoken(store, credential.credential_id, honeytoken.honeytoken_id, correlationId).catch((error: unknown) =>
      log.warn({ err: error, credentialId: credential.credential_id, honeytokenId: honeytoken.honeytoken_id }, 'could not disable a credential that tripped a honeytoken'),
    );
  });
}
