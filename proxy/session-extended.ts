import { serialize } from 'pg-protocol';
import { boundParams } from './approval-extended.js';
import { holdFor, type Hold } from './approval-hold.js';
import { errorsHidden, undoneSync } from './guarded-write.js';
import type { Rewrite, Statement } from './pipeline.js';
import { writeGuardOf } from './policy/write-guard.js';
import { preparedStatements } from './prepared.js';
import { encodeCloseComplete, encodeCommandComplete, encodeParseComplete, encodeReadyForQuery } from './protocol/backend.js';
import type { Bind, Close, Describe, Execute, Parse } from './protocol/frontend.js';
import { renameBindStatement, renameTarget, withRowLimit } from './protocol/rename.js';
import { capRewrite, executedUnderCap, onReply } from './row-cap.js';
import type { UpstreamAccess } from './session-acquire.js';
import { statementOf, type Allowed } from './session-audit.js';
import type { GuardedWrites } from './session-guarded.js';
import { missHooks, type SessionResults } from './cache/session-results.js';
import type { SessionHolds } from './session-holds.js';
import type { SessionHost } from './session-host.js';
import { parseToRun, policyChanged } from './session-statements.js';
import type { StatementGate } from './statement-gate.js';

/** Ends an extended batch upstream (held). */
const SYNC = serialize.sync();

/**
 * A session's extended query protocol: Parse, Bind, Describe, Execute, Close and Sync. Each Parse
 * is decided by the policy and prepared under a server name of its own (session-statements.ts);
 * a statement is prepared again on whatever pooled connection its Bind or Describe reaches, and
 * decided again at Bind. An Execute is counted against the budget, held for approval
 * (session-holds.ts), capped by max_rows, or guarded (session-guarded.ts). After a refusal the rest
 * of the batch is skipped until Sync.
 */
export class ExtendedProtocol {
  /** The Binds of portals whose statement the approval rules hold: its Execute is held, bound to their parameters. */
  private readonly heldBinds = new Map<string, Bind>();
  /** An Execute of this batch (since the last Sync) was sent: a held one may not end the batch early. */
  private ranInBatch = false;
  /**
   * An Execute of this batch ran something other than a cacheable read (SET LOCAL, set_config(..., true),
   * a write): the batch is one implicit transaction upstream, so what the rest of it reads may depend on
   * that, and it bypasses the cache until Sync.
   */
  private batchChanged = false;

  constructor(
    private readonly host: SessionHost,
    private readonly gate: StatementGate,
    private readonly access: UpstreamAccess,
    private readonly guarded: GuardedWrites,
    private readonly results: SessionResults,
    private readonly holds: SessionHolds,
  ) {}

  parse(message: Parse): Promise<void> | void {
    const fresher = this.gate.fresher(message.sql, 'extended');
    if (fresher) return fresher.then(() => this.decideParse(message));
    return this.decideParse(message);
  }

  private decideParse({ name, sql, paramTypes, raw }: Parse): Promise<void> | void {
    const { host } = this;
    if (host.closed) return;
    const { statements } = host;
    const known = name === '' ? undefined : statements.named.get(name);
    if (known && known.sql !== sql) {
      return host.refuse({ severity: 'ERROR', code: '42P05', message: `prepared statement "${name}" already exists` }, 'extended');
    }
    const decision = this.gate.decide(sql, 'extended');
    if (!decision) {
      // As PostgreSQL's failed Parse, a refused one leaves no unnamed statement behind.
      if (name === '') statements.unnamed = undefined;
      return;
    }
    const parse = parseToRun(raw, sql, decision);
    if (name === '') {
      statements.unnamed = { sql, decision, parse };
      host.unsynced = true;
      return this.access.withServer(
        () => {
          statements.unnamedOn = host.upstream.server;
          host.send(parse, { ends: '1' });
        },
        'extended',
        () => statementOf({ sql, decision }),
      );
    }
    const { serverName } = statements.prepareNamed(name, sql, decision, paramTypes, parse);
    host.unsynced = true;
    return this.access.withServer(
      () => {
        if (preparedStatements(host.upstream.server!).has(serverName)) host.pipeline.expect({ kind: 'synthetic', reply: encodeParseComplete });
        else host.send(statements.named.get(name)!.parse, { ends: '1', prepares: serverName });
      },
      'extended',
      () => statementOf({ sql, decision }),
    );
  }

  bind(message: Bind): Promise<void> | void {
    const prepared = this.preparedStatement(message.statement);
    if (!prepared) return;
    const current = this.stillAllowed(message.statement, prepared);
    if (!current) return;
    const { portalRows } = this.host;
    this.host.statements.portals.set(message.portal, current);
    this.results.cache.bound(message, this.host.statements.named.get(message.statement)?.parse ?? this.host.statements.unnamed!.parse);
    if (holdFor(this.host.context.policies.get(this.host.credential!.policy_profile_id), current.decision, this.host.catalog?.current())) this.heldBinds.set(message.portal, message);
    else this.heldBinds.delete(message.portal);
    const made = this.gate.rowCap(current.decision) === undefined ? undefined : onReply('2', portalRows.made(message.portal));
    return this.withStatement(message.statement, message.raw, renameBindStatement, '2', made);
  }

  describe(message: Describe): Promise<void> | void {
    if (message.target !== 'S') return this.host.toServer(message.raw, { ends: 'Tn' });
    return this.preparedStatement(message.name) ? this.withStatement(message.name, message.raw, renameTarget, 'Tn') : undefined;
  }

  execute(message: Execute): Promise<void> | void {
    const { host } = this;
    const allowed = host.statements.portals.get(message.portal);
    if (this.gate.overBudget(allowed?.sql ?? '', 'extended')) return;
    const bind = this.heldBinds.get(message.portal);
    const hold = allowed && bind && holdFor(host.context.policies.get(host.credential!.policy_profile_id), allowed.decision, host.catalog?.current());
    if (hold) return this.held(allowed, bind, hold, message);
    return this.run(allowed, statementOf(allowed), message);
  }

  /**
   * An Execute held for approval. What its batch sent before it (Parse, Bind, Describe) ran nothing:
   * that batch is ended upstream (a Sync whose reply the client does not see), so the connection
   * goes back while the statement waits; once approved, its Bind is sent again (its reply hidden:
   * the client had it) on whatever connection it runs on, then it runs as any Execute.
   */
  private async held(allowed: Allowed, bind: Bind, hold: Hold, message: Execute): Promise<void> {
    const { host } = this;
    if (host.status === 'I' && host.upstream.server && !this.ranInBatch) {
      host.send(SYNC, { ends: 'Z', suppress: true });
      host.unsynced = false;
    }
    const run = await this.holds.held(allowed.sql, allowed.decision, hold, 'extended', boundParams(bind), this.ranInBatch);
    if (!run || host.closed) return;
    if (run.decision.sql !== allowed.decision.sql) return void this.gate.refuse(allowed.sql, 'extended', policyChanged(bind.statement, run.decision));
    const approved = { ...allowed, decision: run.decision };
    host.statements.portals.set(bind.portal, approved);
    await this.withStatement(bind.statement, bind.raw, renameBindStatement, '2', undefined, true);
    if (!host.closed && !host.skipUntilSync) await this.run(approved, run.statement, message);
  }

  /** Execute under a row cap asks the server for no more rows than the cap leaves for the portal, so the server stops producing. */
  private run(allowed: Allowed | undefined, statement: Statement, { portal, maxRows, raw }: Execute): Promise<void> | void {
    const { host, gate } = this;
    const { context, portalRows } = host;
    this.ranInBatch = true;
    // Each Execute of a prepared write invalidates what it writes and opens the read-your-writes window, not only its Parse.
    if (allowed) gate.executing(allowed.decision);
    const guard = allowed && writeGuardOf(context.policies.get(host.credential!.policy_profile_id), allowed.decision.writes);
    const cap = gate.rowCap(allowed?.decision);
    if (guard || cap !== undefined) this.batchChanged = true;
    if (allowed && guard) return this.guarded.execute(allowed, statement, guard, raw);
    if (cap === undefined) {
      const wire = allowed && maxRows === 0 ? this.results.cache.boundOf(portal) : undefined;
      const plan = allowed && wire ? this.results.plan(allowed.sql, allowed.decision, 'extended', statement, wire, this.batchChanged) : undefined;
      if (plan?.outcome === 'hit' || plan?.outcome === 'stale') return this.results.answer(statement, plan, 'extended');
      if (plan?.outcome !== 'miss' && !(plan?.outcome === 'bypass' && plan.cold)) this.batchChanged = true;
      const miss = missHooks(plan);
      if (miss) statement.settled = miss.settled;
      context.budgets.admit(host.credential!);
      return host.toServer(raw, { ends: 'CIs', statement, tap: miss?.tap });
    }
    if (allowed) statement.settled = executedUnderCap(allowed.decision, portalRows);
    const left = portalRows.left(portal, cap);
    if (left <= 0) {
      // The portal gave all the cap allows (the client was told it completed): answered as an exhausted portal.
      host.unsynced = true;
      return host.pipeline.expect({ kind: 'synthetic', reply: encodeCommandComplete('SELECT 0') });
    }
    const limit = maxRows > 0 && maxRows <= left ? maxRows : left;
    // Counted as asked, before the rows come back: an Execute pipelined behind this one sees only what is left.
    portalRows.take(portal, limit);
    context.budgets.admit(host.credential!);
    return host.toServer(limit === maxRows ? raw : withRowLimit(raw, limit), { ends: 'CIs', statement, rewrite: capRewrite(statement, cap, cap - left, { simple: false }) });
  }

  close({ target, name, raw }: Close): Promise<void> | void {
    const { host } = this;
    if (target === 'S' && name !== '') {
      host.statements.named.delete(name);
      host.unsynced = true;
      return host.pipeline.expect({ kind: 'synthetic', reply: encodeCloseComplete });
    }
    if (target === 'P') {
      host.statements.portals.delete(name);
      this.heldBinds.delete(name);
    }
    return host.toServer(raw, { ends: '3', rewrite: target === 'P' && this.gate.rowCap(undefined) !== undefined ? onReply('3', host.portalRows.closed(name)) : undefined });
  }

  sync(raw: Buffer): Promise<void> | void {
    const { host } = this;
    // The gateway refused a statement after another of this batch ran, outside a transaction block:
    // PostgreSQL would roll the batch back at the error, so the statement before it is undone too.
    const refusedAfterRun = host.skipUntilSync && this.ranInBatch && host.status === 'I' && host.upstream.server !== undefined;
    this.ranInBatch = false;
    this.batchChanged = false;
    host.skipUntilSync = false;
    host.unsynced = false;
    if (host.undoAtSync || refusedAfterRun) {
      // A guarded write of this batch, or the batch a refusal ended, is undone: its transaction fails, and this Sync rolls it back.
      host.undoAtSync = false;
      return host.toServer(undoneSync(raw), { ends: 'Z', synced: true, rewrite: errorsHidden });
    }
    if (!host.upstream.server && !host.pipeline.awaitingServer) return host.pipeline.expect({ kind: 'synthetic', reply: () => encodeReadyForQuery(host.status) });
    return host.toServer(raw, { ends: 'Z', synced: true });
  }

  /** Bind or Describe of a named statement: prepared first on this connection if it is not yet, then sent under its server name. */
  private withStatement(name: string, raw: Buffer, rename: (raw: Buffer, name: string) => Buffer, ends: string, rewrite?: Rewrite, suppress = false): Promise<void> | void {
    const { host } = this;
    const { statements } = host;
    const unnamed = statements.unnamed;
    if (name === '' && unnamed) {
      host.unsynced = true;
      return this.access.withServer(() => {
        // A connection the session did not hold since its Parse holds another session's unnamed statement, if any: prepare its own first.
        if (statements.unnamedOn !== host.upstream.server) {
          host.send(unnamed.parse, { ends: '1', suppress: true });
          statements.unnamedOn = host.upstream.server;
        }
        host.send(raw, { ends, rewrite, suppress });
      }, 'extended');
    }
    // preparedStatement made sure the session prepared it.
    const statement = statements.named.get(name)!;
    host.unsynced = true;
    return this.access.withServer(() => {
      if (!preparedStatements(host.upstream.server!).has(statement.serverName)) host.send(statement.parse, { ends: '1', prepares: statement.serverName, suppress: true });
      host.send(rename(raw, statement.serverName), { ends, rewrite, suppress });
    }, 'extended');
  }

  /**
   * The statement a Bind or Describe names, when the client prepared it in this session; else the
   * message is refused (26000), as PostgreSQL refuses an unknown name: a name the session did not
   * prepare could only reach another session's statement left on the pooled connection.
   */
  private preparedStatement(name: string): Allowed | undefined {
    const prepared = this.host.statements.prepared(name);
    if (!prepared) {
      this.host.refuse({ severity: 'ERROR', code: '26000', message: name === '' ? 'unnamed prepared statement does not exist' : `prepared statement "${name}" does not exist` }, 'extended');
    }
    return prepared;
  }

  /**
   * A prepared statement decided again as it is bound, so that a policy (or honeytoken) change since
   * its Parse applies to it: refused (audited) when the policy now refuses it, or when it would now
   * run as another text (a new mask), which needs a new Parse. Undefined when refused.
   */
  private stillAllowed(name: string, prepared: Allowed): Allowed | undefined {
    const { host, gate } = this;
    const credential = host.credential!;
    const policy = host.context.policies.get(credential.policy_profile_id);
    const decision = gate.decideOn(prepared.sql, credential, policy, 'extended');
    if (decision === prepared.decision) return prepared;
    if (decision.action !== 'allow') return gate.refuse(prepared.sql, 'extended', { ...decision, kind: decision.statementKind });
    if (decision.sql !== prepared.decision.sql) return gate.refuse(prepared.sql, 'extended', policyChanged(name, decision));
    return host.statements.redecided(name, prepared, decision);
  }
}
