import { CANCELLATION_FEEDBACK_STREAM } from '../commands/support/cancellation-feedback.js';
import { SUPPORT_CASE_STREAM } from '../commands/support/support-case.js';
import { decodeWith } from '../src/events/envelope.js';
import { CancellationFeedbackRecorded, SupportCaseClosed, SupportCaseOpened, SupportMessagePosted, type SupportSide } from '../src/events/support.js';
import type { RecordedEvent } from '../src/store/port.js';
import { rowProjection } from './row-projection.js';

/** A support case as of its last event; its thread is in support_messages. */
export type SupportCaseRow = {
  case_id: string;
  org_id: string;
  title: string;
  body: string;
  severity: number;
  status: 'open' | 'closed';
  opened_by: string;
  message_count: number;
  /** Who wrote last: `customer` when the case is new, so an operator's queue sorts out what awaits an answer. */
  last_side: SupportSide;
  closed_by: string | null;
  closed_at: string | null;
  revision: number;
  created_at: string;
  updated_at: string;
};

export type SupportMessageRow = {
  message_id: string;
  case_id: string;
  side: SupportSide;
  author: string;
  body: string;
  /** The message's revision in its case's stream: the thread's order. */
  seq: number;
  created_at: string;
};

export type CancellationFeedbackRow = {
  feedback_id: string;
  org_id: string;
  reason: string | null;
  feedback: string;
  recorded_by: string;
  created_at: string;
};

export function evolveSupportCase(row: SupportCaseRow | undefined, event: RecordedEvent): SupportCaseRow | null {
  switch (event.type) {
    case SupportCaseOpened.type: {
      const { data, metadata } = decodeWith(SupportCaseOpened, event);
      return { ...data, status: 'open', message_count: 0, last_side: 'customer', closed_by: null, closed_at: null, revision: event.revision, created_at: metadata.at, updated_at: metadata.at };
    }
    case SupportMessagePosted.type: {
      if (!row) return null;
      const { data, metadata } = decodeWith(SupportMessagePosted, event);
      return { ...row, message_count: row.message_count + 1, last_side: data.side, revision: event.revision, updated_at: metadata.at };
    }
    case SupportCaseClosed.type: {
      if (!row) return null;
      const { data, metadata } = decodeWith(SupportCaseClosed, event);
      return { ...row, status: 'closed', closed_by: data.closed_by, closed_at: metadata.at, revision: event.revision, updated_at: metadata.at };
    }
    default:
      return row ?? null;
  }
}

export function evolveSupportMessage(_row: SupportMessageRow | undefined, event: RecordedEvent): SupportMessageRow | null {
  const { data, metadata } = decodeWith(SupportMessagePosted, event);
  return { ...data, seq: event.revision, created_at: metadata.at };
}

const caseIdOf = (event: RecordedEvent) => (event.stream.startsWith(SUPPORT_CASE_STREAM) ? event.stream.slice(SUPPORT_CASE_STREAM.length) : undefined);

export const supportCasesProjection = rowProjection<SupportCaseRow>({
  name: 'support_cases',
  streamPrefixes: [SUPPORT_CASE_STREAM],
  table: {
    name: 'support_cases',
    key: 'case_id',
    columnNames: ['case_id', 'org_id', 'title', 'body', 'severity', 'status', 'opened_by', 'message_count', 'last_side', 'closed_by', 'closed_at', 'revision', 'created_at', 'updated_at'],
    columns: `case_id text primary key, org_id text not null, title text not null, body text not null, severity integer not null, status text not null, opened_by text not null,
      message_count integer not null, last_side text not null, closed_by text, closed_at timestamptz, revision integer not null, created_at timestamptz not null, updated_at timestamptz not null`,
    orderBy: 'case_id',
    indexes: ['org_id, created_at desc, case_id desc', 'created_at desc, case_id desc'],
  },
  keyOf: caseIdOf,
  evolve: evolveSupportCase,
});

/** Messages carry no org_id in their event: the thread is read through its case, which the query checks first. */
export const supportMessagesProjection = rowProjection<SupportMessageRow>({
  name: 'support_messages',
  streamPrefixes: [SUPPORT_CASE_STREAM],
  table: {
    name: 'support_messages',
    key: 'message_id',
    columnNames: ['message_id', 'case_id', 'side', 'author', 'body', 'seq', 'created_at'],
    columns: 'message_id text primary key, case_id text not null, side text not null, author text not null, body text not null, seq integer not null, created_at timestamptz not null',
    orderBy: 'message_id',
    indexes: ['case_id, seq'],
  },
  keyOf: (event) => (event.type === SupportMessagePosted.type ? decodeWith(SupportMessagePosted, event).data.message_id : undefined),
  evolve: evolveSupportMessage,
});

export function evolveCancellationFeedback(_row: CancellationFeedbackRow | undefined, event: RecordedEvent): CancellationFeedbackRow | null {
  const { data, metadata } = decodeWith(CancellationFeedbackRecorded, event);
  return { ...data, created_at: metadata.at };
}

export const cancellationFeedbackProjection = rowProjection<CancellationFeedbackRow>({
  name: 'cancellation_feedback',
  streamPrefixes: [CANCELLATION_FEEDBACK_STREAM],
  table: {
    name: 'cancellation_feedback',
    key: 'feedback_id',
    columnNames: ['feedback_id', 'org_id', 'reason', 'feedback', 'recorded_by', 'created_at'],
    columns: 'feedback_id text primary key, org_id text not null, reason text, feedback text not null, recorded_by text not null, created_at timestamptz not null',
    orderBy: 'feedback_id',
    indexes: ['org_id, feedback_id'],
  },
  keyOf: (event) => (event.type === CancellationFeedbackRecorded.type ? event.stream.slice(CANCELLATION_FEEDBACK_STREAM.length) : undefined),
  evolve: evolveCancellationFeedback,
});
