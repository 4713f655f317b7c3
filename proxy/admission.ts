import type { Logger } from 'pino';
import type { ErrorFields } from './protocol/backend.js';
import type { SessionRegistry } from './session-registry.js';

/**
 * Whether a proxy admits agents. An enrolled data plane's closes for good when its enrollment
 * token is revoked or expires (docs/self-host.md): it no longer hears of revoked credentials or
 * changed policies, so it fails closed.
 */
export class Admission {
  private reason: string | undefined;
  private readonly listeners = new Set<(reason: string) => void>();

  /** Why logins are refused, or undefined while they are admitted. */
  closedBy(): string | undefined {
    return this.reason;
  }

  /** Refuses every login from now on, for `reason`; the first reason stays. */
  close(reason: string): void {
    if (this.reason !== undefined) return;
    this.reason = reason;
    for (const listener of this.listeners) listener(reason);
  }

  onClose(listener: (reason: string) => void): void {
    this.listeners.add(listener);
  }
}

/** The audit rule of a login refused because the proxy admits no one. */
export const ADMISSION_RULE = 'enrollment';

/** SQLSTATE 08004, sqlserver_rejected_establishment_of_sqlconnection: the server, not the credential, refuses. */
export function admissionRefusal(reason: string): ErrorFields {
  return { severity: 'FATAL', code: '08004', message: `this pgward data plane no longer serves: ${reason}` };
}

/** When admission closes, the sessions already logged in end too, told why. */
export function endSessionsOnClose(admission: Admission, registry: SessionRegistry, logger: Logger): void {
  admission.onClose((reason) => {
    const sessions = registry.all();
    for (const session of sessions) session.terminate('auth_failed', reason);
    logger.error({ sessions: sessions.length, reason }, 'this data plane no longer serves agents: its sessions were ended and new logins are refused');
  });
}
