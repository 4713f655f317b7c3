import type { FastifyRequest } from 'fastify';
import type pg from 'pg';
import { credentialsProjection } from '../../../projections/credentials.js';
import { awaitCaughtUp } from '../../../projections/maintenance.js';
import { findCredentialByTokenHash, type TokenCredential } from '../../../queries/credentials.js';
import { matchesHash, sha256Hex } from '../../crypto/tokens.js';
import { Problem } from '../../http/problem.js';
import type { EventStore } from '../../store/port.js';
import { bearerChallenge } from '../transport.js';
import { logEvent } from '../../log-events.js';
import { findIpRules } from '../../../queries/ip-rules.js';
import { checkCredentialAddress } from '../../net/ip-rules.js';

const AGENT_TOKEN = /^pgw_agt_[A-Za-z0-9_-]{43}$/;

/** How long a token lookup waits for the credentials read model before refusing (read-your-writes right after registration or rotation). */
const FRESHNESS_MS = 2_000;

function unauthorized(request: FastifyRequest, detail: string): Problem {
  logEvent(request.log, 'login_refused', { source: 'mcp', reason: detail }, 'agent token refused');
  return new Problem('UNAUTHORIZED', detail, { headers: { 'www-authenticate': bearerChallenge(request) } });
}

/**
 * The credential an agent token (`pgw_agt_...`) belongs to, checked on every request: only an
 * active credential not past expires_at is found, so a disabled, revoked, rotated-away or expired
 * one is refused at once (401). The stored hash is compared in constant time. With `projectId`
 * (the /v1/projects/{project_id}/mcp form) the token must belong to that project.
 */
export async function authenticateAgent(deps: { store: EventStore; pool: pg.Pool }, request: FastifyRequest, projectId?: string): Promise<TokenCredential> {
  const header = request.headers.authorization;
  const token = typeof header === 'string' ? /^Bearer +(\S+)$/i.exec(header)?.[1] : undefined;
  if (token === undefined) throw unauthorized(request, 'send Authorization: Bearer <agent token (pgw_agt_...)>');
  if (!AGENT_TOKEN.test(token)) throw unauthorized(request, 'the bearer token is not an agent token (pgw_agt_...)');
  const hash = sha256Hex(token);
  const lookup = () => findCredentialByTokenHash(deps.pool, hash);
  const credential = (await lookup()) ?? ((await awaitCaughtUp(deps.store, deps.pool, credentialsProjection, FRESHNESS_MS)) ? await lookup() : undefined);
  if (!credential || !matchesHash(token, credential.token_hash)) throw unauthorized(request, 'the agent token is unknown, disabled, revoked, rotated away or expired');
  if (projectId !== undefined && credential.project_id !== projectId) throw unauthorized(request, `the agent token does not belong to project ${projectId}`);
  return credential;
}

/**
 * Whether the credential a request authenticated is still usable now (active, not past
 * expires_at, its token not rotated away): checked again right before each statement runs, so
 * a kill-switch, revocation, rotation or expiry stops the statements of a request already under
 * way (a JSON-RPC batch, calls waiting for an upstream connection), as it ends a wire session.
 */
export async function stillUsable(pool: pg.Pool, credential: Pick<TokenCredential, 'credential_id' | 'token_hash'>): Promise<boolean> {
  return (await findCredentialByTokenHash(pool, credential.token_hash))?.credential_id === credential.credential_id;
}

/**
 * Refuses (403 FORBIDDEN) a request from an address the credential's project's IP rules, or its own, refuse
 * (docs/http-api.md#ip-rules); `clientAddress` is request.ip, the client behind trusted proxies.
 * `refused` audits the refusal with its reason, as the wire audits a login refused for its address.
 */
export async function requireAllowedAddress(
  pool: pg.Pool,
  request: FastifyRequest,
  credential: Pick<TokenCredential, 'credential_id' | 'project_id' | 'ip_rules'>,
  clientAddress: string,
  refused: (reason: string) => void,
): Promise<void> {
  const verdict = checkCredentialAddress(await findIpRules(pool, credential.project_id), credential.ip_rules, clientAddress);
  if (verdict.allowed) return;
  refused(verdict.reason);
  logEvent(request.log, 'login_refused', { source: 'mcp', credential_id: credential.credential_id, project_id: credential.project_id, rule: 'ip_rules', reason: verdict.reason }, 'agent request refused for its address');
  throw new Problem('FORBIDDEN', 'this project does not accept requests from your address; ask its administrator to change its IP rules');
}
