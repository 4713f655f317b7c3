import type { Session } from './session.js';

/** Sessions by cancel key and by credential: for CancelRequest routing and live enforcement. */
export class SessionRegistry {
  private readonly byKey = new Map<number, Session>();
  private readonly byCredential = new Map<string, Set<Session>>();

  add(session: Session, processId: number): void {
    this.byKey.set(processId, session);
  }

  bind(session: Session, credentialId: string): void {
    let set = this.byCredential.get(credentialId);
    if (!set) this.byCredential.set(credentialId, (set = new Set()));
    set.add(session);
  }

  remove(session: Session, processId: number, credentialId: string | undefined): void {
    if (this.byKey.get(processId) === session) this.byKey.delete(processId);
    if (credentialId) this.byCredential.get(credentialId)?.delete(session);
  }

  session(processId: number): Session | undefined {
    return this.byKey.get(processId);
  }

  sessionsOf(credentialId: string): readonly Session[] {
    return [...(this.byCredential.get(credentialId) ?? [])];
  }

  all(): readonly Session[] {
    return [...this.byKey.values()];
  }
}
