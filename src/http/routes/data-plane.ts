import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import { ENROLLMENT_STREAM, enrollmentStatus, evolveEnrollment, type EnrollmentRow } from '../../../projections/enrollments.js';
import { findEnrollmentByHash } from '../../../queries/enrollments.js';
import type { Keyring } from '../../crypto/seal.js';
import { matchesHash, sha256Hex } from '../../crypto/tokens.js';
import { appendRefusal } from '../../enroll/appends.js';
import { decisionRefusal } from '../../enroll/decision-check.js';
import { ProjectStreams } from '../../enroll/project-streams.js';
import { resealFor } from '../../enroll/reseal.js';
import { dataPlaneKeyring, ENROLLMENT_TOKEN } from '../../enroll/token.js';
import { DATA_PLANE_PREFIXES, ENROLLMENT_END_HEADER, ExpectedRevision, fromWire, toWire, WireNewEvent, type AuditBacklogAnswer, type ChannelEnd } from '../../enroll/wire.js';
import { INGEST_DURABLE } from '../../bus/port.js';
import { IngestProgress } from '../../enroll/ingest-progress.js';
import { StoreError, type RecordedEvent } from '../../store/port.js';
import { Problem } from '../problem.js';
import { visibleProject } from './projects.js';
import { foldStream, type Api, type ApiDeps } from './support.js';

/** Events a page of catch-up carries at most. */
const PAGE = 500;
/** A comment line on an idle stream, so both ends notice a dead connection. */
const HEARTBEAT_MS = 15_000;
/** How often a live stream looks at its enrollment again, besides following its events (a backstop). */
const RECHECK_MS = 5_000;
/** The largest decision message a data plane sends: its base64 stays within the API's body limit. */
const MAX_DECISION_BYTES = 1024 * 1024;


interface Enrolled {
  readonly row: EnrollmentRow;
  readonly keyring: Keyring;
  readonly streams: ProjectStreams;
}

function refused(end: ChannelEnd | undefined, detail: string): Problem {
  return new Problem('UNAUTHORIZED', detail, { headers: { 'www-authenticate': 'Bearer realm="pgward-data-plane"', ...(end ? { [ENROLLMENT_END_HEADER]: end.reason } : {}) } });
}

/** Why the enrollment no longer authenticates at `now`, or undefined while it does. */
function endOf(row: EnrollmentRow, now: Date): ChannelEnd | undefined {
  const status = enrollmentStatus(row, now);
  if (status === 'revoked') return { reason: 'revoked', detail: `the enrollment token ${row.token_prefix}… was revoked at ${new Date(row.revoked_at!).toISOString()}` };
  if (status === 'expired') return { reason: 'expired', detail: `the enrollment token ${row.token_prefix}… expired at ${new Date(row.expires_at!).toISOString()}` };
  return undefined;
}

const Prefixes = z
  .union([z.enum(DATA_PLANE_PREFIXES), z.array(z.enum(DATA_PLANE_PREFIXES))])
  .transform((given) => (Array.isArray(given) ? given : [given]))
  .describe('Stream prefixes to read, of the categories a data plane sees');
const After = z.string().regex(/^-1$|^[0-9]{1,20}$/).transform(BigInt);

/**
 * The data-plane channel (docs/self-host.md): an enrolled proxy reads its project's events, live,
 * and appends the few its proxy writes, and sends its decisions for ingest, each request
 * authenticated by its enrollment token. Not management operations: hidden from the OpenAPI
 * document and the management MCP.
 */
export function dataPlaneRoutes(app: Api, deps: ApiDeps): void {
  const channels = new Set<ServerResponse>();
  // A project's ownership cache is shared by its enrollment's requests: ownership never changes.
  const owners = new Map<string, ProjectStreams>();
  // Before the server waits for its connections to end: a live stream never would (its data plane reopens it elsewhere or later).
  app.addHook('preClose', async () => {
    for (const channel of channels) channel.end();
  });

  const authenticate = async (authorization: string | undefined): Promise<Enrolled> => {
    const match = typeof authorization === 'string' ? /^Bearer +(\S+)$/i.exec(authorization) : null;
    const token = match?.[1];
    if (!token || !ENROLLMENT_TOKEN.test(token)) throw refused(undefined, 'send Authorization: Bearer <self-host enrollment token (pgw_enr_...)>');
    const row = await findEnrollmentByHash(deps.pool, sha256Hex(token));
    if (!row || !matchesHash(token, row.token_hash)) throw refused(undefined, 'the enrollment token is unknown');
    const end = endOf(row, deps.now());
    if (end) throw refused(end, end.detail);
    try {
      await visibleProject(deps, row.org_id, row.project_id);
    } catch {
      throw refused({ reason: 'revoked', detail: 'the enrollment’s project was deleted' }, `the enrollment’s project ${row.project_id} was deleted`);
    }
    let streams = owners.get(row.enrollment_id);
    if (!streams) owners.set(row.enrollment_id, (streams = new ProjectStreams(deps.store, row.project_id, row.org_id)));
    return { row, keyring: dataPlaneKeyring(token), streams };
  };

  /** The project's events of `events`, as its data plane receives them. */
  const shown = async (enrolled: Enrolled, events: readonly RecordedEvent[]): Promise<RecordedEvent[]> => {
    const out: RecordedEvent[] = [];
    for (const event of events) if (await enrolled.streams.shows(event)) out.push(resealFor(event, deps.keyring, enrolled.keyring));
    return out;
  };

  app.get('/v1/data-plane/enrollment', { schema: { hide: true }, config: { public: true } }, async (request) => {
    const { row } = await authenticate(request.headers.authorization);
    return {
      enrollment_id: row.enrollment_id,
      project_id: row.project_id,
      org_id: row.org_id,
      region_label: row.region_label,
      expires_at: row.expires_at === null ? null : new Date(row.expires_at).toISOString(),
      max_message_bytes: Math.min(deps.decisions.bus.maxMessageBytes, MAX_DECISION_BYTES),
    };
  });

  app.get(
    '/v1/data-plane/events',
    { schema: { hide: true, querystring: z.object({ after: After, prefix: Prefixes, limit: z.coerce.number().int().min(1).max(PAGE).default(PAGE) }) }, config: { public: true } },
    async (request) => {
      const enrolled = await authenticate(request.headers.authorization);
      const { prefix, limit } = request.query;
      // Read on past other projects' events until some of this one's are found or the log ends.
      for (let after = request.query.after; ; ) {
        const batch = await deps.store.readAll(after, { streamPrefixes: prefix, limit });
        if (batch.length === 0) return { events: [] };
        const events = await shown(enrolled, batch);
        if (events.length > 0) return { events: events.map(toWire) };
        after = batch.at(-1)!.position;
      }
    },
  );

  app.get(
    '/v1/data-plane/streams/:stream',
    { schema: { hide: true, params: z.object({ stream: z.string().max(200) }), querystring: z.object({ from: z.coerce.number().int().min(0).default(0) }) }, config: { public: true } },
    async (request) => {
      const enrolled = await authenticate(request.headers.authorization);
      const { stream } = request.params;
      // Another project's stream reads as an empty one: its existence is not this data plane's business.
      if (!(await enrolled.streams.owns(stream))) return { events: [] };
      // The hash-mask key is made here, sealed under the control plane's keyring, never by the data plane.
      if (stream === `hashkey-${enrolled.row.project_id}`) await deps.hashKeys.load(enrolled.row.project_id);
      return { events: (await shown(enrolled, await deps.store.readStream(stream, request.query.from))).map(toWire) };
    },
  );

  app.post(
    '/v1/data-plane/streams/:stream',
    { schema: { hide: true, params: z.object({ stream: z.string().max(200) }), body: z.object({ events: z.array(WireNewEvent).min(1).max(16), expected: ExpectedRevision }) }, config: { public: true } },
    async (request, reply) => {
      const enrolled = await authenticate(request.headers.authorization);
      const { stream } = request.params;
      const owner = await enrolled.streams.whose(stream);
      const events = request.body.events.map((event) => {
        const { stream: _, revision: __, position: ___, ...fresh } = fromWire({ ...event, stream, revision: 0, position: '0' });
        return fresh;
      });
      const refusal = appendRefusal(stream, events, enrolled.row.project_id, owner);
      if (refusal) throw new Problem('FORBIDDEN', refusal);
      try {
        const result = await deps.store.append(stream, events, owner === 'none' ? 'no_stream' : request.body.expected);
        return { next_expected_revision: result.nextExpectedRevision, position: result.position.toString(), duplicate: result.duplicate };
      } catch (error) {
        if (error instanceof StoreError && error.code === 'WRONG_EXPECTED_REVISION') {
          return reply.code(409).type('application/problem+json').send({ type: '/v1/problems/CONFLICT', code: 'CONFLICT', status: 409, detail: error.message, request_id: request.id, actual: error.details.actual ?? null });
        }
        throw error;
      }
    },
  );

  app.post(
    '/v1/data-plane/decisions',
    { schema: { hide: true, body: z.object({ id: z.string().min(1).max(200), data: z.base64() }) }, config: { public: true } },
    async (request, reply) => {
      const enrolled = await authenticate(request.headers.authorization);
      const { enrollment_id: enrollmentId, project_id: projectId } = enrolled.row;
      // The message id is the bus's dedup key: a data plane names only its own messages.
      if (!request.body.id.startsWith(`${enrollmentId}:`)) throw new Problem('FORBIDDEN', `a message id must start with ${enrollmentId}:`);
      const data = Buffer.from(request.body.data, 'base64');
      if (data.length > MAX_DECISION_BYTES) throw new Problem('PAYLOAD_TOO_LARGE', `a decision message holds at most ${MAX_DECISION_BYTES} bytes`);
      const refusal = decisionRefusal(data, projectId, enrollmentId);
      if (refusal) throw new Problem('FORBIDDEN', refusal);
      await deps.decisions.bus.publish({ id: request.body.id, data });
      return reply.code(202).send({ accepted: true });
    },
  );

  const progress = new IngestProgress(() => deps.decisions.bus.backlog(INGEST_DURABLE));
  app.get('/v1/data-plane/audit-backlog', { schema: { hide: true }, config: { public: true } }, async (request): Promise<AuditBacklogAnswer> => {
    await authenticate(request.headers.authorization);
    return progress.answer(performance.now());
  });

  app.get(
    '/v1/data-plane/subscribe',
    { schema: { hide: true, querystring: z.object({ after: After, prefix: Prefixes }) }, config: { public: true } },
    async (request, reply) => {
      const enrolled = await authenticate(request.headers.authorization);
      const enrollmentStream = `${ENROLLMENT_STREAM}${enrolled.row.enrollment_id}`;
      const subscription = deps.store.subscribe(request.query.after, { streamPrefixes: [...request.query.prefix, enrollmentStream] });
      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', 'x-request-id': request.id });
      channels.add(raw);
      let closed = false;
      const timers: NodeJS.Timeout[] = [];
      const close = (end?: ChannelEnd): void => {
        if (closed) return;
        closed = true;
        for (const timer of timers) clearInterval(timer);
        channels.delete(raw);
        void subscription.close();
        if (end) {
          request.log.warn({ enrollment_id: enrolled.row.enrollment_id, project_id: enrolled.row.project_id, reason: end.reason }, 'ended a data plane’s channel: its enrollment no longer authenticates');
          raw.end(`event: end\ndata: ${JSON.stringify(end)}\n\n`);
        } else raw.end();
      };
      const recheck = async (): Promise<void> => {
        // From the enrollment's own stream: the read model may not have the revocation that woke this yet.
        const row = await foldStream(deps, enrollmentStream, evolveEnrollment);
        const end = row ? endOf(row, deps.now()) : { reason: 'revoked' as const, detail: 'the enrollment is gone' };
        if (end) close(end);
      };
      timers.push(setInterval(() => raw.write(': ping\n\n'), HEARTBEAT_MS).unref());
      timers.push(setInterval(() => void recheck().catch((error: unknown) => request.log.warn({ err: error }, 'could not recheck an enrollment')), RECHECK_MS).unref());
      if (enrolled.row.expires_at !== null) {
        const left = Date.parse(enrolled.row.expires_at) - deps.now().getTime();
        if (left < 2 ** 31 - 1) timers.push(setTimeout(() => close(endOf(enrolled.row, new Date(Date.parse(enrolled.row.expires_at!) + 1))), Math.max(0, left)).unref());
      }
      raw.on('close', () => close());
      raw.write(': connected\n\n');
      try {
        for await (const event of subscription) {
          if (closed) break;
          if (event.stream === enrollmentStream) {
            await recheck();
            continue;
          }
          const [visible] = await shown(enrolled, [event]);
          if (!visible || closed) continue;
          if (!raw.write(`id: ${visible.position}\ndata: ${JSON.stringify(toWire(visible))}\n\n`)) await new Promise((resolve) => raw.once('drain', resolve));
        }
      } catch (error) {
        request.log.warn({ err: error }, 'a data plane’s channel failed; it reconnects');
      } finally {
        close();
      }
    },
  );
}
