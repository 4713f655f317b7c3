import type { Logger } from 'pino';
import type { CredentialRow } from '../projections/credentials.js';
import type { IpRulesRow } from '../projections/ip-rules.js';
import { logEvent } from '../src/log-events.js';
import { checkCredentialAddress } from '../src/net/ip-rules.js';
import type { AuditEventKind } from '../src/events/audit.js';
import type { LiveView } from './views/live-view.js';

/** The audit rule of a login refused for its address. */
export const IP_RULES_RULE = 'ip_rules';

/** Why the credential's project's IP rules, or its own, refuse a client at `address`; undefined when both let it in. */
export function addressRefusal(rules: LiveView<IpRulesRow> | undefined, credential: Pick<CredentialRow, 'project_id' | 'ip_rules'>, address: string): string | undefined {
  const verdict = checkCredentialAddress(rules?.get(credential.project_id), credential.ip_rules, address);
  return verdict.allowed ? undefined : verdict.reason;
}

/** What ending a live session for its address needs of it. */
export interface AddressedSession {
  readonly clientAddress: string;
  terminate(event: AuditEventKind, reason: string): void;
}

/**
 * When a project's rules or a credential's own change, the live wire sessions from an address they
 * now refuse end, as a revoked credential's do. The client is told only that it may no longer
 * connect; the log says why.
 */
export function endRefusedSessions(
  views: { readonly ipRules: LiveView<IpRulesRow>; readonly credentials: LiveView<CredentialRow> },
  sessionsOf: (credentialId: string) => readonly AddressedSession[],
  logger: Logger,
): () => void {
  const endRefused = (credential: CredentialRow): void => {
    for (const session of sessionsOf(credential.credential_id)) {
      const refusal = addressRefusal(views.ipRules, credential, session.clientAddress);
      if (refusal === undefined) continue;
      session.terminate('auth_failed', 'connections from this address are no longer allowed');
      logEvent(logger, 'sessions_closed', { credential_id: credential.credential_id, project_id: credential.project_id, sessions: 1, reason: refusal, rule: IP_RULES_RULE }, 'closed a live session the IP rules now refuse');
    }
  };
  const stopProjects = views.ipRules.onChange((projectId) => {
    for (const credential of views.credentials.values()) if (credential.project_id === projectId) endRefused(credential);
  });
  const stopCredentials = views.credentials.onChange((_credentialId, before, after) => {
    if (after && after.ip_rules !== before?.ip_rules) endRefused(after);
  });
  return () => {
    stopProjects();
    stopCredentials();
  };
}
