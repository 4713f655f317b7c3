import { canonicalBytes } from '../crypto/canonical-json.js';
import { openSecret, sealSecret, type Keyring } from '../crypto/seal.js';
import { DatabaseRegistered, DatabaseUpdated } from '../events/databases.js';
import type { SealedSecret } from '../events/fields.js';
import { PolicyRoleProvisioned } from '../events/policies.js';
import { ProjectHashKeyGenerated } from '../events/projects.js';
import type { RecordedEvent } from '../store/port.js';

type Payload = Record<string, unknown>;

/** Where each event type that carries a sealed secret holds it, and the associated data it is sealed with. */
const sealedIn: Readonly<Record<string, (data: Payload) => { holder: Payload; field: string; aad: string } | undefined>> = {
  [DatabaseRegistered.type]: (data) => ({ holder: data, field: 'password', aad: data.database_id as string }),
  [DatabaseUpdated.type]: (data) => {
    const changes = data.changes as Payload;
    return changes.password === undefined ? undefined : { holder: changes, field: 'password', aad: data.database_id as string };
  },
  [PolicyRoleProvisioned.type]: (data) => ({ holder: data, field: 'password', aad: data.role_name as string }),
  [ProjectHashKeyGenerated.type]: (data) => ({ holder: data, field: 'key', aad: `hash-key:${data.project_id as string}` }),
};

/**
 * The event as a data plane receives it: a secret sealed under the control plane's keyring is
 * opened and sealed again under the data plane's own (src/enroll/token.ts), with the same
 * associated data, so the data plane's proxy opens it as the control plane's would. Events
 * without a sealed secret pass unchanged, byte for byte.
 */
export function resealFor(event: RecordedEvent, from: Keyring, to: Keyring): RecordedEvent {
  const locate = sealedIn[event.type];
  if (!locate) return event;
  const data = JSON.parse(Buffer.from(event.data).toString('utf8')) as Payload;
  const found = locate(data);
  if (!found) return event;
  const plaintext = openSecret(found.holder[found.field] as SealedSecret, from, found.aad);
  found.holder[found.field] = sealSecret(plaintext, to, found.aad);
  return { ...event, data: canonicalBytes(data) };
}
