import { randomInt } from 'node:crypto';
import type { Session } from './session.js';

/** Sessions by cancel key and by credential: for CancelRequest routing and live enforcement. */
export class SessionRegistry {
  private readonly byKey = new Map<number, Session>();
  private readonly byCredential = new Map<string, Set<Session>>();

  /** Registers a session under a random process id (its cancel key's half) no live session holds, and returns it. */
  add(session: Session, draw: () => number = () => randomInt(1, 2 ** 31 - 1)): number {
    let processId = draw();
    while (this.byKey.has(processId)) processId = draw();
    this.byKey.set(processId, session);
    return processId;
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
