import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import type { ApprovalRow } from '../../../projections/approvals.js';
import { ApprovalFeed } from '../approval-feed.js';
import { Problem } from '../problem.js';
import type { Caller } from '../plugins/auth.js';
import { toApproval } from './approvals.js';
import { visibleProject } from './projects.js';
import { errorResponses, IdParam, requireRole, type Api, type ApiDeps } from './support.js';

interface ApprovalStreamLimits {
  /** A comment line this often keeps proxies and the browser from dropping an idle stream. */
  readonly heartbeatMs: number;
  /** Open streams one caller (a key, a person) may hold in this process. */
  readonly perCaller: number;
  /** A stream is ended after this long: the browser reconnects, so the caller is authenticated again (a revoked key or ended session loses its stream). */
  readonly lifetimeMs: number;
}

const APPROVAL_STREAM_LIMITS: ApprovalStreamLimits = { heartbeatMs: 15_000, perCaller: 5, lifetimeMs: 10 * 60_000 };

/** The browser waits this long before reconnecting a stream that ended. */
const RETRY_MS = 2_000;

function callerKey(caller: Caller): string {
  return caller.kind === 'api_key' ? caller.keyId : `${caller.kind}:${caller.orgId}:${caller.subject}`;
}

function message(event: string, data: unknown, id?: string): string {
  return `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** Ends a stream and resolves once its socket closed (the response says `Connection: close`), or after a second at most. */
function ended(stream: ServerResponse): Promise<void> {
  if (stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, 1_000);
    stream.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    stream.end();
  });
}

/**
 * The approvals queue as server-sent events (docs/approvals.md "Live"): `ready` once the stream is
 * live, then an `approval` event with the whole request each time one of the project's requests
 * changes. Fed by the process's one ApprovalFeed; ended at shutdown before the server drains.
 */
export function approvalEventRoutes(app: Api, deps: ApiDeps): void {
  const limits: ApprovalStreamLimits = { ...APPROVAL_STREAM_LIMITS, heartbeatMs: deps.approvalStreamHeartbeatMs ?? APPROVAL_STREAM_LIMITS.heartbeatMs };
  const feed = new ApprovalFeed(deps.store, (error) => app.log.warn({ err: error }, 'the approvals feed failed; its streams were ended'));
  const open = new Map<string, Set<ServerResponse>>();
  // Before the server stops taking connections: each stream ended and its socket closed (not left
  // idle in keep-alive after close() looked for idle ones), so none holds up the drain.
  app.addHook('preClose', async () => {
    const streams = [...open.values()].flatMap((set) => [...set]);
    await Promise.all(streams.map((stream) => ended(stream)));
    await feed.close();
  });

  app.get(
    '/v1/projects/:project_id/approvals/events',
    {
      schema: {
        operationId: 'streamApprovals',
        summary: 'Follow a project’s approval requests as server-sent events',
        description:
          'A `text/event-stream`: `ready` once the stream is live (read the list then: every change after it arrives here), then an `approval` event carrying the whole ApprovalRequest (as getApproval answers it; its `id` is `<approval id>:<revision>`) each time a request of the project is held or changes status, ' +
          `and a comment line every ${limits.heartbeatMs / 1000} s. A caller holds at most ${limits.perCaller} streams at once (429 beyond); a stream ends after ${limits.lifetimeMs / 60_000} minutes and at shutdown, and the browser reconnects.`,
        tags: ['approvals'],
        params: z.object({ project_id: IdParam('project id') }),
        response: { 200: { description: 'The events', content: { 'text/event-stream': { schema: z.string() } } }, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'RATE_LIMITED') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'viewer');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const key = callerKey(caller);
      const mine = open.get(key) ?? new Set<ServerResponse>();
      if (mine.size >= limits.perCaller) {
        throw new Problem('RATE_LIMITED', `this caller already holds ${mine.size} approval streams, the most it may; close one first`, { headers: { 'retry-after': String(RETRY_MS / 1000) } });
      }
      const stream = reply.raw;
      open.set(key, mine.add(stream));
      let unwatch = (): void => undefined;
      const timers: NodeJS.Timeout[] = [];
      const closed = (): void => {
        unwatch();
        for (const timer of timers) clearTimeout(timer);
        mine.delete(stream);
        if (mine.size === 0 && open.get(key) === mine) open.delete(key);
      };
      stream.once('close', closed);
      reply.hijack();
      stream.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-request-id': request.id, 'x-accel-buffering': 'no', connection: 'close' });
      stream.write(`retry: ${RETRY_MS}\n\n`);
      try {
        unwatch = await feed.watch(projectId, {
          change: (row: ApprovalRow) => stream.write(message('approval', toApproval(row), `${row.approval_id}:${row.revision}`)),
          end: () => stream.end(),
        });
      } catch (error) {
        request.log.warn({ err: error }, 'the approvals feed could not start');
        stream.end();
        return;
      }
      if (stream.destroyed) return unwatch();
      stream.write(message('ready', { project_id: projectId }));
      timers.push(setInterval(() => stream.write(': heartbeat\n\n'), limits.heartbeatMs), setTimeout(() => stream.end(), limits.lifetimeMs));
    },
  );
}
