/**
 * DDL of the PostgreSQL event store. Appends go through one function so an append is a single
 * round trip; the function takes a transaction-scoped advisory lock, which serializes appends,
 * so the global position is dense and follows commit order: a reader that saw position p has
 * seen every event below p, because the lock is released only after commit.
 */
import { ALL_EVENTS_CHANNEL, AUDIT_CATEGORY, CATEGORY_CHANNEL_PREFIX, CATEGORY_PATTERN } from './categories.js';

export const APPEND_LOCK_KEY = 7_294_061_112;

/** The events outside the audit streams: the predicate of events_beside_audit, which its reader repeats so the planner may use it. */
const BESIDE_AUDIT = `stream not like '${AUDIT_CATEGORY}%'`;

/** A function returning the events after p_after in position order, the first p_limit of those `where` admits. */
const readEventsFunction = (name: string, where: string): string => `create or replace function pgward.${name}(p_after bigint, p_patterns text[], p_limit integer)
returns table ("position" bigint, stream text, revision integer, event_id uuid, type text, data bytea, metadata bytea)
language sql stable set enable_seqscan = off set enable_bitmapscan = off set enable_sort = off as $$
  select e.position, e.stream, e.revision, e.event_id, e.type, e.data, e.metadata from pgward.events e
   where e.position > p_after and ${where}
   order by e.position limit p_limit
$$;`;

export const eventStoreSchemaSql = `
create schema if not exists pgward;

-- Facts about the store fixed once. decision_ids, the form of decisions' event ids (EventStore.decisionIdForm):
-- sequential for a store this migration creates, hashed for one an earlier release made, whose ingest (still
-- running in a rolling upgrade, or after a rollback) knows only hashed ids. Decided here, under the migration's
-- lock and before any append of this release, so that no ingest of this release sees another form.
create table if not exists pgward.store_settings (name text primary key, value text not null);
insert into pgward.store_settings (name, value)
  select 'decision_ids', case when to_regclass('pgward.events') is null then 'sequential' else 'hashed' end
  on conflict (name) do nothing;

create table if not exists pgward.events (
  position    bigint primary key,
  stream      text not null,
  revision    integer not null,
  event_id    uuid not null unique,
  type        text not null,
  data        bytea not null,
  metadata    bytea not null,
  recorded_at timestamptz not null default now(),
  unique (stream, revision)
);

-- No statement filters or orders by these (the functions below look event ids up through their unique
-- index, whose uniqueness the planner knows without statistics): autovacuum's analyses, one every tenth
-- of growth, would otherwise sort samples of every payload.
alter table pgward.events alter column data set statistics 0, alter column metadata set statistics 0,
  alter column event_id set statistics 0, alter column recorded_at set statistics 0;

-- The events after p_after in position order, of the streams matching any of p_patterns (all when
-- null). Only the primary key's order serves this read: without statistics (autovacuum off, or a
-- table grown since it was analyzed) the planner prices position > p_after at a third of the
-- table and the stream filter as selective, and reads every event after p_after into a sort to
-- return the first p_limit. A reader that fell behind, such as a projection, then paid for its whole
-- backlog on every batch, and fell further behind (measured: 5 ms for 3,000 events behind, 15 ms
-- with parallel workers at 100,000 events, against about 1 ms for the index scan).
${readEventsFunction('read_events', '(p_patterns is null or e.stream like any(p_patterns))')}

-- The events of every category but the audit streams', by position: an append of decisions adds no
-- entry here, and a reader of other categories (read_events_beside_audit) steps from one of its events
-- to the next, where the primary key's order made it visit every decision appended between them (the
-- webhook outbox, woken by each signed audit checkpoint, visited the thousand decisions it covers).
create index if not exists events_beside_audit on pgward.events (position) where ${BESIDE_AUDIT};

-- read_events for patterns that match no audit stream (categories.ts readsBesideAudit): the same rows,
-- found through events_beside_audit.
${readEventsFunction('read_events_beside_audit', `${BESIDE_AUDIT} and e.stream like any(p_patterns)`)}

-- The position of each category's newest event (categories.ts), kept by append_events: a reader of
-- some categories learns here, without walking other categories' events, whether any of its own
-- lie beyond its checkpoint. A store created before this table is filled from its events once.
do $do$ begin
  if to_regclass('pgward.category_heads') is null then
    create table pgward.category_heads (category text primary key, position bigint not null);
    perform pg_advisory_xact_lock(${APPEND_LOCK_KEY});
    insert into pgward.category_heads
      select substring(e.stream from '${CATEGORY_PATTERN}'), max(e.position) from pgward.events e
       where substring(e.stream from '${CATEGORY_PATTERN}') is not null group by 1;
  end if;
end $do$;

-- How many events after p_after are of the streams matching any of p_patterns (all when null).
-- With p_categories (the categories of every pattern) the count stops at their newest event, and
-- costs nothing when that is not beyond p_after.
create or replace function pgward.count_events(p_after bigint, p_patterns text[], p_categories text[])
returns bigint language plpgsql stable set enable_seqscan = off set enable_bitmapscan = off as $$
declare
  v_upto bigint;
begin
  if p_categories is null then
    select max(e.position) into v_upto from pgward.events e;
  else
    select max(h.position) into v_upto from pgward.category_heads h where h.category = any(p_categories);
  end if;
  if v_upto is null or v_upto <= p_after then
    return 0;
  end if;
  return (select count(*) from pgward.events e
           where e.position > p_after and e.position <= v_upto and (p_patterns is null or e.stream like any(p_patterns)));
end $$;

-- Earlier versions took the payloads as two bytea arrays, which travel and parse as hex text.
drop function if exists pgward.append_events(text, text, uuid[], text[], bytea[], bytea[]);

-- p_payloads holds each event's data and then its metadata, back to back; event i's data is the
-- bytes [p_bounds[2i-1], p_bounds[2i]) and its metadata [p_bounds[2i], p_bounds[2i+1]).
-- Earlier versions returned no category_before: a function's result type changes only by dropping it
-- (in the one transaction of this script, so no append finds it missing).
do $do$ begin
  if exists (select 1 from pg_proc p where p.pronamespace = 'pgward'::regnamespace and p.proname = 'append_events'
              and pg_get_function_result(p.oid) not like '%category_before%') then
    drop function pgward.append_events(text, text, uuid[], text[], bytea, integer[]);
  end if;
end $do$;

-- What an append of p_ids to p_stream meets when some of its ids are stored already: 'duplicate' (the
-- same events, all of them, in this stream and in this order: a retry) or 'id_conflict'; no row
-- when none of them is stored.
create or replace function pgward.append_known(p_stream text, p_ids uuid[])
returns table (outcome text, actual integer, last_position bigint, category_before bigint)
language sql stable set enable_seqscan = off as $$
  select case when k.same then 'duplicate' else 'id_conflict' end, case when k.same then k.revision else -1 end,
         case when k.same then k.position else -1 end, null::bigint
    from (select count(*) = cardinality(p_ids) and bool_and(e.stream = p_stream) and array_agg(e.event_id order by e.revision) = p_ids as same,
                 max(e.revision) as revision, max(e.position) as position
            from pgward.events e where e.event_id = any(p_ids) having count(*) > 0) as k
$$;

-- category_before is the position of the newest event of the stream's category before this append
-- (-1 when it had none; null for a stream without a category): a reader that has consumed the
-- category up to it knows that the appended events are the category's next ones.
-- An append whose ids are new (nearly every one) looks none of them up: the unique index on event_id
-- refuses a known id as the rows go in, and only then are the ids looked up, to tell a retried
-- append (duplicate) from ids appended elsewhere or in another order (id_conflict). Looking them up
-- first cost an index probe an event before the insert's own.
create or replace function pgward.append_events(
  p_stream text, p_expected text, p_ids uuid[], p_types text[], p_payloads bytea, p_bounds integer[]
) returns table (outcome text, actual integer, last_position bigint, category_before bigint)
-- Every lookup here is meant to use an index. Plans cached while the table was small and never
-- analyzed would otherwise scan it whole on each append (measured: 20-30 ms per append at 100k events).
language plpgsql set enable_seqscan = off as $$
declare
  v_count integer := cardinality(p_ids);
  v_actual integer;
  v_position bigint;
  v_category text := substring(p_stream from '${CATEGORY_PATTERN}');
  v_category_before bigint;
begin
  if cardinality(p_bounds) <> 2 * v_count + 1 or p_bounds[1] <> 0 or p_bounds[2 * v_count + 1] <> octet_length(p_payloads) then
    raise exception 'append_events: the bounds do not cover the payloads';
  end if;
  perform pg_advisory_xact_lock(${APPEND_LOCK_KEY});

  select coalesce(max(e.revision), -1) into v_actual from pgward.events e where e.stream = p_stream;
  if not (p_expected = 'any'
          or (p_expected = 'no_stream' and v_actual = -1)
          or (p_expected = 'exists' and v_actual >= 0)
          or (p_expected ~ '^[0-9]+$' and p_expected::integer = v_actual)) then
    -- A retried append finds its stream moved on by its own events: that is a duplicate, not a conflict.
    return query select * from pgward.append_known(p_stream, p_ids);
    if not found then
      return query select 'wrong_expected'::text, v_actual, -1::bigint, null::bigint;
    end if;
    return;
  end if;

  select coalesce(max(e.position), -1) into v_position from pgward.events e;
  begin
    insert into pgward.events (position, stream, revision, event_id, type, data, metadata)
      select v_position + u.i, p_stream, v_actual + u.i, u.id, u.type,
             substring(p_payloads from p_bounds[2 * u.i - 1] + 1 for p_bounds[2 * u.i] - p_bounds[2 * u.i - 1]),
             substring(p_payloads from p_bounds[2 * u.i] + 1 for p_bounds[2 * u.i + 1] - p_bounds[2 * u.i])
        from unnest(p_ids, p_types) with ordinality as u (id, type, i);
  exception when unique_violation then
    return query select * from pgward.append_known(p_stream, p_ids);
    if not found then
      raise;
    end if;
    return;
  end;
  -- One wake-up per category (see categories.ts), so a subscriber of other categories hears nothing.
  if v_category is not null then
    select coalesce(max(h.position), -1) into v_category_before from pgward.category_heads h where h.category = v_category;
    insert into pgward.category_heads (category, position) values (v_category, v_position + v_count)
      on conflict (category) do update set position = excluded.position;
    perform pg_notify('${CATEGORY_CHANNEL_PREFIX}' || v_category, (v_position + v_count)::text);
  end if;
  perform pg_notify('${ALL_EVENTS_CHANNEL}', (v_position + v_count)::text);
  return query select 'ok'::text, v_actual + v_count, v_position + v_count, v_category_before;
end $$;
`;
