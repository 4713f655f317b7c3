/**
 * The proxy's per-statement work around the result cache when nearly every read misses, as under
 * `pgbench -S` over a million rows (`npm run bench:cache-miss`): one session's policy decision,
 * cache plan, capture of a one-row reply and the ReadyForQuery that ends it, for point reads of
 * distinct keys into a database whose cache holds 10,000 entries (full after the warm-up). No
 * socket, no upstream: CPU µs a statement of this process (process.cpuUsage), so it compares code
 * even on a busy machine.
 *
 * PGWARD_BENCH_CACHE_PROTOCOL: `extended` (default; one Parse, a Bind of another key each time) or
 * `simple` (each key's literal in the text, decided by the policy engine each time).
 * PGWARD_BENCH_CACHE=off: the same with the database's cache off (every statement bypasses it).
 * PGWARD_BENCH_CACHE_KEYS: the keys drawn from (default 1,000,000); 100 makes every statement after
 * the warm-up a hit, answered with the reply a client gets (cachedReply).
 * PGWARD_BENCH_CACHE_STATEMENTS: statements a round (default 300,000; three rounds).
 */
import type { CredentialRow } from '../../projections/credentials.js';
import type { PolicyRow } from '../../projections/policies.js';
import { ResultCaches } from '../../proxy/cache/caches.js';
import { cachedReply, SessionCache, type CachePlan } from '../../proxy/cache/session-cache.js';
import { decideStatement, type StatementDecision } from '../../proxy/policy/hook.js';
import { loadParser } from '../../proxy/policy/parser.js';
import { BackendScanner, encodeCommandComplete } from '../../proxy/protocol/backend.js';
import type { Bind } from '../../proxy/protocol/frontend.js';
import { wholeNumber } from './bench-kit.js';

const PROTOCOL = process.env.PGWARD_BENCH_CACHE_PROTOCOL === 'simple' ? 'simple' : 'extended';
const STATEMENTS = wholeNumber('PGWARD_BENCH_CACHE_STATEMENTS', 'statements', 1, 300_000);
const WARMUP = 50_000;
const ACCOUNTS = wholeNumber('PGWARD_BENCH_CACHE_KEYS', 'keys', 1, 1_000_000);

await loadParser();
const policy = {
  policy_id: 'pol_bench', project_id: 'prj_bench', revision: 1, status: 'active', read_only: false, allowed_tables: ['public.*'], masked_columns: {}, row_filters: {}, allow_catalog: false,
  max_rows: null, honeytokens: [], statement_allow: null, statement_deny: [], denied_tables: [], migration_safety: 'off', max_affected_rows: null, write_mode: 'normal',
} as unknown as PolicyRow;
/** One array for every call, as the proxy's honeytoken view hands out: the decision caches are keyed by it. */
const NO_CANARIES: readonly never[] = [];
const context = { credential: { credential_id: 'cred_bench' } as CredentialRow, policy, protocol: PROTOCOL, honeytokens: { canariesOf: () => NO_CANARIES, tripped: () => undefined } } as const;
const config = { enabled: process.env.PGWARD_BENCH_CACHE !== 'off', ttl_seconds: 60, max_entries: 10_000, swr_seconds: 30 };
const session = new SessionCache(new ResultCaches(() => config, { lookup: () => undefined, skipped: () => undefined, evicted: () => undefined, bytes: () => undefined }));

const dataRow = Buffer.from([0x44, 0, 0, 0, 11, 0, 1, 0, 0, 0, 1, 0x30]);
const commandComplete = encodeCommandComplete('SELECT 1');
const replies = [dataRow, commandComplete].map((bytes) => [new BackendScanner().scan(bytes)[0]!, bytes] as const);
const extendedText = 'SELECT abalance FROM pgbench_accounts WHERE aid = $1;';
const parse = Buffer.concat([Buffer.from('P'), Buffer.alloc(4), Buffer.from(`\0${extendedText}\0`), Buffer.from([0, 0])]);

function allowed(sql: string): Extract<StatementDecision, { action: 'allow' }> {
  const decision = decideStatement(sql, context);
  if (decision.action !== 'allow') throw new Error(`${sql}: ${decision.reason}`);
  return decision;
}

const common = { databaseId: 'db_bench', upstream: 'up_bench', policy, catalogVersion: 'v1', sessionValues: undefined, inTransaction: false, pinned: false } as const;

function planOf(index: number): CachePlan {
  const aid = 1 + ((index * 7919) % ACCOUNTS);
  if (PROTOCOL === 'simple') {
    const sql = `SELECT abalance FROM pgbench_accounts WHERE aid = ${aid};`;
    return session.plan({ ...common, sql, decision: allowed(sql), protocol: 'simple' });
  }
  session.bound({ portal: '', statement: '', paramFormats: [0], params: [Buffer.from(String(aid))], resultFormats: [0] } as unknown as Bind, parse);
  return session.plan({ ...common, sql: extendedText, decision: allowed(extendedText), protocol: 'extended', wire: session.boundOf('')! });
}

let hits = 0;
let replied = 0;
function statement(index: number): void {
  const plan = planOf(index);
  if (plan.outcome === 'hit') {
    hits++;
    replied += cachedReply(plan.result, PROTOCOL === 'simple' ? 'I' : undefined).length;
  }
  const capture = plan.outcome === 'miss' ? plan.capture : undefined;
  for (const [message, bytes] of replies) capture?.tap(message, bytes);
  capture?.settled(true);
  session.ready('I');
}

for (let i = 0; i < WARMUP; i++) statement(i);
console.log(`[bench:cache-miss] ${PROTOCOL} protocol, cache ${config.enabled ? 'on' : 'off'}, ${STATEMENTS} statements a round over ${ACCOUNTS} keys, Node ${process.version}`);
for (let round = 0; round < 3; round++) {
  const start = process.cpuUsage();
  for (let i = 0; i < STATEMENTS; i++) statement(WARMUP + round * STATEMENTS + i);
  const used = process.cpuUsage(start);
  console.log(`[bench:cache-miss] round ${round + 1}: ${((used.user + used.system) / STATEMENTS).toFixed(2)} µs CPU a statement (hits so far ${hits}, ${replied} bytes replied)`);
}
