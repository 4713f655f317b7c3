import { ApprovalExecuted, ApprovalExecutionStarted, ApprovalFailed, ApprovalRequested } from '../events/approvals.js';
import { decodeEvent } from '../events/catalog.js';
import { CredentialDisabled, CredentialUsed } from '../events/credentials.js';
import type { NewEvent } from '../store/port.js';

/**
 * What a data plane's proxy may append to its project's streams, and nothing else: that a
 * credential was used, that a tripped honeytoken disabled one, and the requests for approval its
 * sessions hold and how their execution ended. Each names the stream's own resource.
 */
const allowed: Readonly<Record<string, { readonly prefix: string; readonly idField: string }>> = {
  [CredentialUsed.type]: { prefix: 'credential-', idField: 'credential_id' },
  [CredentialDisabled.type]: { prefix: 'credential-', idField: 'credential_id' },
  [ApprovalRequested.type]: { prefix: 'approval-', idField: 'approval_id' },
  [ApprovalExecutionStarted.type]: { prefix: 'approval-', idField: 'approval_id' },
  [ApprovalExecuted.type]: { prefix: 'approval-', idField: 'approval_id' },
  [ApprovalFailed.type]: { prefix: 'approval-', idField: 'approval_id' },
};

/**
 * Why the data plane of `projectId` may not append `events` to `stream`, or undefined when it may.
 * `owner` says whose the stream is: the project's, another's, or nobody's yet (only a request for
 * approval naming the project may open a stream, and only as its first event).
 */
export function appendRefusal(stream: string, events: readonly NewEvent[], projectId: string, owner: 'ours' | 'other' | 'none'): string | undefined {
  if (owner === 'other') return 'the stream is not this enrollment’s project’s';
  for (const [index, event] of events.entries()) {
    const rule = allowed[event.type];
    if (!rule) return `event ${index}: a data plane may not append ${event.type}`;
    if (!stream.startsWith(rule.prefix)) return `event ${index}: ${event.type} belongs in a ${rule.prefix} stream`;
    let data: Record<string, unknown>;
    try {
      data = decodeEvent({ ...event, stream, revision: 0, position: 0n }).data as Record<string, unknown>;
    } catch (error) {
      return `event ${index}: ${(error as Error).message.slice(0, 500)}`;
    }
    if (`${rule.prefix}${String(data[rule.idField])}` !== stream) return `event ${index}: its ${rule.idField} is not the stream's`;
    const opens = owner === 'none' && index === 0;
    if (opens && (event.type !== ApprovalRequested.type || data.project_id !== projectId)) return 'only a request for approval naming this enrollment’s project may open a stream';
    if (!opens && event.type === ApprovalRequested.type) return `event ${index}: a request for approval opens its stream`;
  }
  return undefined;
}
