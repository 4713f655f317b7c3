import { ConsentRecorded, type ConsentDocumentType } from '../../src/events/identity.js';
import { newId } from '../../src/ids.js';
import type { EventStore } from '../../src/store/port.js';
import { emit, handle, type Aggregate, type CommandContext } from '../handle.js';

export interface ConsentInput {
  readonly documentType: ConsentDocumentType;
  readonly documentVersion: string;
  readonly accepted: boolean;
}

type RecordConsents = { readonly userId: string; readonly ip: string | null; readonly consents: readonly ConsentInput[] };

/** A person's consents, one stream per person (`user-<id>`): records are appended, never changed. */
const consentLog: Aggregate<null, RecordConsents> = {
  initial: null,
  evolve: (state) => state,
  decide: (_state, command, now) =>
    command.consents.map((consent) =>
      emit(ConsentRecorded, { consent_id: newId('cns_'), user_id: command.userId, document_type: consent.documentType, document_version: consent.documentVersion, accepted: consent.accepted, accepted_at: now, ip_address: command.ip }),
    ),
};

export async function recordConsents(store: Pick<EventStore, 'readStream' | 'append'>, command: RecordConsents, context: CommandContext) {
  return handle(store, `user-${command.userId}`, consentLog, command, context);
}
