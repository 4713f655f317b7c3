import type { Logger } from 'pino';
import type { CredentialRow } from '../projections/credentials.js';
import type { IpRulesRow } from '../projections/ip-rules.js';
import { logEvent } from '../src/log-events.js';
import { checkAddress } from '../src/net/ip-rules.js';
import type { AuditEventKind } from '../src/events/audit.js';
import type { LiveView } from './views/live-view.js';

/** The audit rule of a login refused for its address. */
export const IP_RULES_RULE = 'ip_rules';

/** Why the project's IP rules refuse a client at `address`, or undefined when they let it in. */
export function addressRefusal(rules: LiveView<IpRulesRow> | undefined, projectId: string, address: string): string | undefined {
  const verdict = checkAddress(rules?.get(projectId), address);
  return verdict.allowed ? undefined : verdict.reason;
}

/** What ending a live session for its address needs of it. */
export interface AddressedSession {
  readonly clientAddress: string;
  terminate(event: AuditEventKind, reason: string): void;
}

/**
 * When a project's rules change, its live wire sessions from an address they now refuse end, as a
 * revoked credential's do. The client is told only that it may no longer connect; the log says why.
 */
export function endRefusedSessions(
  views: { readonly ipRules: LiveView<IpRulesRow>; readonly credentials: LiveView<CredentialRow> },
  sessionsOf: (credentialId: string) => readonly AddressedSession[],
  logger: Logger,
): () => void {
  return views.ipRules.onChange((projectId) => {
    for (const credential of views.credentials.values()) {
      if (credential.project_id !== projectId) continue;
      for (const session of sessionsOf(credential.credential_id)) {
        const refusal = addressRefusal(views.ipRules, projectId, session.clientAddress);
        if (refusal === undefined) continue;
        session.terminate('auth_failed', 'connections from this address are no longer allowed');
        logEvent(logger, 'sessions_closed', { credential_id: credential.credential_id, project_id: projectId, sessions: 1, reason: refusal, rule: IP_RULES_RULE }, 'closed a live session the project’s IP rules now refuse');
      }
    }
  });
}
