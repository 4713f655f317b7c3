import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type pg from 'pg';
import { canonicalize } from '../../crypto/canonical-json.js';
import { migrate } from '../../pg/migrate.js';
import { Problem } from '../problem.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A create: honours Idempotency-Key. */
    idempotent?: boolean;
  }
  interface FastifyRequest {
    idempotency?: { scope: string; key: string };
  }
}

const TTL_HOURS = 24;
const KEY = /^[\x21-\x7e]{1,255}$/;

const schemaSql = `
create schema if not exists pgward;
create table if not exists pgward.idempotency_keys (
  scope        text not null,
  key          text not null,
  request_hash text not null,
  status       integer,
  body         text,
  content_type text,
  created_at   timestamptz not null default now(),
  primary key (scope, key)
);
create index if not exists idempotency_keys_created on pgward.idempotency_keys (created_at);`;

export function idempotencyKeyOf(request: FastifyRequest): string | undefined {
  const key = request.headers['idempotency-key'];
  if (key === undefined) return undefined;
  if (typeof key !== 'string' || !KEY.test(key)) {
    throw new Problem('INVALID_INPUT', 'Idempotency-Key must be 1-255 visible ASCII characters', { errors: [{ field: 'Idempotency-Key', message: 'must be 1-255 visible ASCII characters' }] });
  }
  return key;
}

function requestHash(request: FastifyRequest): string {
  return createHash('sha256').update(`${request.method} ${request.url}\n${canonicalize(request.body ?? null)}`).digest('hex');
}

interface Stored {
  request_hash: string;
  status: number | null;
  body: string | null;
  content_type: string | null;
}

/**
 * Idempotency-Key on creates (spec §7 rule 3): the first request with a key claims it; its
 * response (anything below 500) is stored durably for 24 h, and a retry with the same key and
 * body gets that response again. The same key with another body is 409 IDEMPOTENCY_KEY_REUSED.
 * A retry while the first is still running is 409 CONFLICT; a 5xx releases the key.
 */
export interface BodySealer {
  /** Stored responses may carry secrets shown once (API keys, credential secrets): they are kept sealed. */
  seal(body: string, aad: string): string;
  open(stored: string, aad: string): string;
}

export async function installIdempotency(app: FastifyInstance, pool: pg.Pool, scopeOf: (request: FastifyRequest) => string, sealer: BodySealer): Promise<void> {
  await migrate(pool, schemaSql);

  app.addHook('preHandler', async (request, reply) => {
    if (!request.routeOptions.config.idempotent) return;
    const key = idempotencyKeyOf(request);
    if (!key) return;
    const scope = scopeOf(request);
    const hash = requestHash(request);
    const claimed = await pool.query(
      `insert into pgward.idempotency_keys (scope, key, request_hash) values ($1, $2, $3)
       on conflict (scope, key) do update set request_hash = excluded.request_hash, status = null, body = null, content_type = null, created_at = now()
         where pgward.idempotency_keys.created_at < now() - make_interval(hours => ${TTL_HOURS})
       returning 1`,
      [scope, key, hash],
    );
    if (claimed.rowCount === 1) {
      request.idempotency = { scope, key };
      return;
    }
    const { rows } = await pool.query<Stored>('select request_hash, status, body, content_type from pgward.idempotency_keys where scope = $1 and key = $2', [scope, key]);
    const stored = rows[0];
    if (!stored) throw new Problem('CONFLICT', 'the Idempotency-Key was released while this request arrived; retry it');
    if (stored.request_hash !== hash) throw new Problem('IDEMPOTENCY_KEY_REUSED', `Idempotency-Key ${key} was already used with a different request; use a new key for a new request`);
    if (stored.status === null) throw new Problem('CONFLICT', `a request with Idempotency-Key ${key} is still in progress; retry it shortly`, { headers: { 'retry-after': '1' } });
    return reply
      .code(stored.status)
      .header('idempotent-replayed', 'true')
      .type(stored.content_type ?? 'application/json')
      .serializer((payload: unknown) => String(payload))
      .send(stored.body === null ? '' : sealer.open(stored.body, `${scope}\u0000${key}`));
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const claim = request.idempotency;
    if (!claim) return payload;
    if (reply.statusCode >= 500) {
      await pool.query('delete from pgward.idempotency_keys where scope = $1 and key = $2 and status is null', [claim.scope, claim.key]);
    } else {
      await pool.query('update pgward.idempotency_keys set status = $3, body = $4, content_type = $5 where scope = $1 and key = $2', [
        claim.scope,
        claim.key,
        reply.statusCode,
        sealer.seal(typeof payload === 'string' ? payload : String(payload ?? ''), `${claim.scope}\u0000${claim.key}`),
        String(reply.getHeader('content-type') ?? 'application/json'),
      ]);
    }
    return payload;
  });
}
