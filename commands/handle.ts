import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import { derivedUuid } from '../src/crypto/derived-uuid.js';
import { decodeEvent, type CatalogEvent } from '../src/events/catalog.js';
import { encodeEvent, type EventDefinition, type EventMetadata } from '../src/events/envelope.js';
import { StoreError, type EventStore, type NewEvent, type RecordedEvent } from '../src/store/port.js';
import { DomainError } from './domain-error.js';

/** An event a decide function wants appended: its definition and payload. */
export interface Emit<S extends z.ZodType = z.ZodType> {
  readonly definition: EventDefinition<string, S>;
  readonly data: z.input<S>;
}

export function emit<S extends z.ZodType>(definition: EventDefinition<string, S>, data: z.input<S>): Emit {
  return { definition, data } as Emit;
}

export interface Aggregate<State, Command> {
  readonly initial: State;
  evolve(state: State, event: CatalogEvent): State;
  /** Pure: the events the command produces, or a DomainError. */
  decide(state: State, command: Command, now: string): Emit[] | DomainError;
}

export interface CommandContext {
  /** The request's correlation id (X-Request-Id). */
  readonly correlationId: string;
  readonly actor: string;
  /** Makes the event ids deterministic, so a retried command appends nothing new. */
  readonly idempotencyKey?: string;
  readonly now?: () => Date;
}

export interface Handled<State> {
  readonly state: State;
  /** The command's events as stored, decoded (on a retry: the ones the first attempt stored). */
  readonly events: readonly CatalogEvent[];
  /** The same events as recorded, for building a response with a projection's own evolve (read-your-writes). */
  readonly recorded: readonly RecordedEvent[];
  readonly revision: number;
}

const MAX_ATTEMPTS = 12;

/**
 * Load → fold → decide → append with the revision read. A concurrent writer's conflict reloads
 * and decides again; the result is built from the events just decided (read-your-writes).
 */
export async function handle<State, Command>(
  store: Pick<EventStore, 'readStream' | 'append'>,
  stream: string,
  aggregate: Aggregate<State, Command>,
  command: Command,
  context: CommandContext,
): Promise<Handled<State>> {
  for (let attempt = 1; ; attempt++) {
    const history = await store.readStream(stream);
    let state = history.map(decodeEvent).reduce(aggregate.evolve, aggregate.initial);
    const revision = history.length - 1;
    const at = (context.now?.() ?? new Date()).toISOString();
    const decided = aggregate.decide(state, command, at);
    if (decided instanceof DomainError) throw decided;
    const encoded: NewEvent[] = decided.map((e, index) => {
      const metadata: EventMetadata = {
        event_id: context.idempotencyKey ? derivedUuid(`${stream}\u0000${context.idempotencyKey}\u0000${index}`) : randomUUID(),
        correlation_id: context.correlationId,
        actor: context.actor,
        at,
      };
      return encodeEvent(e.definition, e.data, metadata);
    });
    try {
      const result = await store.append(stream, encoded, revision === -1 ? 'no_stream' : revision);
      if (result.duplicate) {
        // A retry of a command that already happened: answer with what was stored, not with this attempt's decision.
        const ids = new Set(encoded.map((e) => e.id));
        const current = await store.readStream(stream);
        const recorded = current.filter((e) => ids.has(e.id));
        return {
          state: current.map(decodeEvent).reduce(aggregate.evolve, aggregate.initial),
          events: recorded.map(decodeEvent),
          recorded,
          revision: current.length - 1,
        };
      }
      const first = result.nextExpectedRevision - encoded.length + 1;
      const recorded = encoded.map((e, i) => ({ ...e, stream, revision: first + i, position: result.position - BigInt(encoded.length - 1 - i) }));
      const events = recorded.map(decodeEvent);
      state = events.reduce(aggregate.evolve, state);
      return { state, events, recorded, revision: result.nextExpectedRevision };
    } catch (error) {
      if (error instanceof StoreError && error.code === 'WRONG_EXPECTED_REVISION' && attempt < MAX_ATTEMPTS) {
        // Jittered backoff, so writers contending for one stream spread out instead of colliding again.
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 2 * attempt));
        continue;
      }
      throw error;
    }
  }
}
