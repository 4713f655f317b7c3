import type pg from 'pg';
import { migrate } from '../pg/migrate.js';

/**
 * The delivering role's own tables (not read models: they hold what was sent, which no event
 * records, so a rebuild could not reproduce them):
 * - `webhook_outbox`: the position in the event log up to which notifications were enqueued;
 * - `webhook_targets`: each endpoint as of that position (the read model's row, sealed secrets
 *   included), and whether deliveries to it are failing;
 * - `webhook_credentials`: which project each credential belongs to;
 * - `webhook_messages`: one row per message and endpoint, its body fixed when enqueued;
 * - `webhook_attempts`: every attempt, with status code, latency and error.
 */
const DDL = `
create schema if not exists pgward;
create table if not exists pgward.webhook_outbox (name text primary key, position bigint not null);
create table if not exists pgward.webhook_targets (
  webhook_id text primary key,
  project_id text not null,
  row jsonb not null,
  failing_since timestamptz
);
create index if not exists webhook_targets_project on pgward.webhook_targets (project_id);
create table if not exists pgward.webhook_credentials (credential_id text primary key, project_id text not null);
create table if not exists pgward.webhook_messages (
  webhook_id text not null,
  message_id text not null,
  position bigint not null,
  type text not null,
  body text not null,
  status text not null default 'pending',
  attempts integer not null default 0,
  first_attempt_at timestamptz,
  next_attempt_at timestamptz not null default now(),
  finished_at timestamptz,
  primary key (webhook_id, message_id)
);
create index if not exists webhook_messages_pending on pgward.webhook_messages (webhook_id, position) where status = 'pending';
create table if not exists pgward.webhook_attempts (
  attempt_id bigserial primary key,
  webhook_id text not null,
  message_id text not null,
  type text not null,
  attempt integer not null,
  attempted_at timestamptz not null,
  status_code integer,
  latency_ms integer not null,
  error text,
  outcome text not null
);
create index if not exists webhook_attempts_by_webhook on pgward.webhook_attempts (webhook_id, attempt_id);
`;

export async function ensureWebhookTables(pool: pg.Pool): Promise<void> {
  await migrate(pool, DDL);
}
