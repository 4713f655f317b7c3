import { below, constantText, isOn, names, nodeType, pathOf, Reader, type At } from './ast.js';
import { visit, type Ctx } from './context.js';
import { exprs, struct } from './expressions.js';
import { relationUse } from './queries.js';
import { Level, tablesOf } from './scope.js';
import { relaxesReadOnly, SETTABLE, SHOWABLE } from './settings.js';

export type StatementHandler = (ctx: Ctx, reader: Reader) => void;

const QUERY_TYPES: ReadonlySet<string> = new Set(['SelectStmt', 'InsertStmt', 'UpdateStmt', 'DeleteStmt']);

const EXPLAIN_OPTIONS: ReadonlySet<string> = new Set([
  'analyze', 'verbose', 'costs', 'settings', 'generic_plan', 'buffers', 'serialize', 'wal', 'timing', 'summary', 'memory', 'format',
]);

const COPY_OPTIONS: ReadonlySet<string> = new Set([
  'format', 'freeze', 'delimiter', 'null', 'default', 'header', 'quote', 'escape', 'force_quote', 'force_not_null', 'force_null',
  'encoding', 'on_error', 'log_verbosity',
]);

/** PostgreSQL's CURSOR_OPT_HOLD bit of DeclareCursorStmt.options. */
const CURSOR_OPT_HOLD = 0x0020;

interface Option {
  readonly name: string;
  readonly value: string | undefined;
}

/** DefElem options (`EXPLAIN (ANALYZE false)`, `BEGIN READ WRITE`); a bare option has no value. */
function options(ctx: Ctx, items: readonly At[]): Option[] {
  return items.map((item) => {
    let option: Option = { name: '', value: undefined };
    if (nodeType(item.node) !== 'DefElem') ctx.out.unsupportedConstruct(nodeType(item.node));
    else
      visit(ctx, item, (reader) => {
        const arg = reader.node('arg');
        option = { name: (reader.string('defname') ?? '').toLowerCase(), value: arg ? constantText(arg.node)?.toLowerCase() : undefined };
        reader.skip('defaction', 'location', 'defnamespace');
      });
    return option;
  });
}

function transactionOptions(ctx: Ctx, items: readonly At[], statement: string): void {
  for (const option of options(ctx, items)) {
    if (relaxesReadOnly(option.name, option.value)) ctx.out.effect('transaction', `${statement} READ WRITE`);
  }
}

/** A query operand of EXPLAIN, PREPARE or DECLARE; other statements there are not analyzed. */
function operand(ctx: Ctx, at: At | undefined, where: string): void {
  if (!at) return;
  const type = nodeType(at.node);
  if (QUERY_TYPES.has(type)) ctx.query(ctx, null, at);
  else {
    if (type === 'MergeStmt' || type === 'CreateTableAsStmt') ctx.out.effect('write', type === 'MergeStmt' ? 'MERGE' : 'CREATE TABLE AS');
    if (type === 'ExecuteStmt') ctx.out.effect('prepare', 'EXECUTE', true);
    ctx.out.unsupportedConstruct(`${where} ${type}`);
  }
}

function setStatement(ctx: Ctx, reader: Reader): void {
  const kind = reader.string('kind');
  const name = (reader.string('name') ?? '').toLowerCase();
  const local = reader.bool('is_local');
  reader.skip('args');
  const detail = `${kind === 'VAR_RESET' ? 'RESET' : 'SET'} ${name}`;
  if (kind === 'VAR_RESET_ALL') ctx.out.effect('setting', 'RESET ALL', true);
  // SET TRANSACTION and SET SESSION CHARACTERISTICS AS TRANSACTION: the latter outlives the transaction.
  else if (kind === 'VAR_SET_MULTI') {
    transactionOptions(ctx, reader.list('args'), `SET ${name.toUpperCase()}`);
    if (name === 'session characteristics') ctx.out.sessionChanges.push('SET SESSION CHARACTERISTICS');
  } else if (!SETTABLE.has(name)) ctx.out.effect('setting', detail, true);
  else if (!local) ctx.out.sessionChanges.push(detail);
}

function explain(ctx: Ctx, reader: Reader): void {
  const opts = options(ctx, reader.list('options'));
  for (const option of opts) if (!EXPLAIN_OPTIONS.has(option.name)) ctx.out.unsupportedConstruct(`EXPLAIN option ${option.name}`);
  const executes = opts.some((option) => option.name === 'analyze' && isOn(option.value));
  const before = ctx.out.effects.length;
  const relationsBefore = ctx.out.relations.length;
  operand(ctx, reader.node('query'), 'EXPLAIN');
  const inner = ctx.out.effects.splice(before);
  if (executes) {
    ctx.out.effects.push(...inner.map((effect) => (effect.family === 'write' ? { ...effect, detail: `EXPLAIN ANALYZE of ${effect.detail}` } : effect)));
    return;
  }
  // Without ANALYZE nothing executes: writes and row locks are only planned.
  ctx.out.effects.push(...inner.filter((effect) => effect.family !== 'write' && effect.family !== 'lock'));
  ctx.out.relations.push(...ctx.out.relations.splice(relationsBefore).map((use) => ({ ...use, written: false })));
}

function copy(ctx: Ctx, reader: Reader): void {
  const from = reader.bool('is_from');
  const program = reader.bool('is_program');
  const file = reader.string('filename');
  if (program || file !== undefined) {
    ctx.out.effect('copy', `COPY ${from ? 'FROM' : 'TO'} ${program ? 'PROGRAM' : 'a server file'}`, true);
  }
  if (from) ctx.out.effect('write', 'COPY FROM');
  for (const option of options(ctx, reader.list('options'))) if (!COPY_OPTIONS.has(option.name)) ctx.out.unsupportedConstruct(`COPY option ${option.name}`);
  if (reader.node('whereClause')) ctx.out.unsupportedConstruct('COPY ... WHERE');
  operand(ctx, reader.node('query'), 'COPY');
  const relation = reader.struct('relation', 'RangeVar');
  if (!relation) return;
  // COPY reads or fills the named table alone, never its inheritance children.
  const entry = relationUse(ctx, relation, from, 'self');
  const tables = tablesOf(entry);
  const columns = names(reader.list('attlist'));
  for (const [index, column] of columns.entries()) {
    const candidates = tables.map((table) => ({ table, column }));
    ctx.out.columns.push({ candidates, path: pathOf(below(reader.slot, 'attlist', index)), rewritable: false, written: from, text: column });
  }
  if (columns.length === 0 && tables.length > 0) ctx.out.wholeRows.push({ tables, form: 'copy', text: `COPY ${relationText(relation)}` });
}

function relationText(relation: Reader): string {
  const schema = relation.fields.schemaname;
  return typeof schema === 'string' ? `${schema}.${String(relation.fields.relname)}` : String(relation.fields.relname);
}

function relationList(ctx: Ctx, reader: Reader): void {
  for (const item of reader.list('relations')) {
    if (nodeType(item.node) !== 'RangeVar') ctx.out.unsupportedConstruct(nodeType(item.node));
    else visit(ctx, item, (relation) => relationUse(ctx, relation, true, 'only'));
  }
}

/** Always refused: the statement runs code, changes session state or reaches outside the database. */
function refusedAlways(family: 'procedure' | 'notify' | 'prepare' | 'setting', detail: string): StatementHandler {
  return (ctx, reader) => {
    ctx.out.effect(family, detail, true);
    reader.skip(...Object.keys(reader.fields));
  };
}

export const utilityHandlers: Readonly<Record<string, StatementHandler>> = {
  VariableSetStmt: setStatement,
  VariableShowStmt: (ctx, reader) => {
    const name = (reader.string('name') ?? '').toLowerCase();
    if (!SHOWABLE.has(name)) ctx.out.effect('setting', `SHOW ${name}`, true);
  },
  TransactionStmt: (ctx, reader) => {
    const kind = reader.string('kind') ?? '';
    reader.skip('savepoint_name', 'chain', 'location');
    if (reader.has('gid') || kind.includes('PREPARE')) ctx.out.effect('transaction', 'two-phase commit (PREPARE TRANSACTION)', true);
    reader.skip('gid');
    transactionOptions(ctx, reader.list('options'), 'BEGIN');
  },
  ExplainStmt: explain,
  CopyStmt: copy,
  TruncateStmt: (ctx, reader) => {
    ctx.out.effect('write', 'TRUNCATE');
    relationList(ctx, reader);
    // CASCADE also empties every table with a foreign key to these, allowed or not.
    if (reader.string('behavior') === 'DROP_CASCADE') ctx.out.unsupportedConstruct('TRUNCATE ... CASCADE');
    reader.skip('restart_seqs');
  },
  LockStmt: (ctx, reader) => {
    ctx.out.effect('lock', 'LOCK TABLE');
    relationList(ctx, reader);
    reader.skip('mode', 'nowait');
  },
  PrepareStmt: (ctx, reader) => {
    operand(ctx, reader.node('query'), 'PREPARE');
    ctx.out.effect('prepare', 'PREPARE', true);
    reader.skip('name', 'argtypes');
  },
  ExecuteStmt: (ctx, reader) => {
    ctx.out.effect('prepare', 'EXECUTE', true);
    exprs(ctx, new Level(null), reader.list('params'));
    reader.skip('name');
  },
  DeallocateStmt: refusedAlways('prepare', 'DEALLOCATE'),
  CallStmt: (ctx, reader) => {
    struct(ctx, reader, 'funccall', 'FuncCall', (call) => {
      ctx.out.visited.add(call.fields);
      ctx.out.effect('procedure', `CALL ${names(call.list('funcname')).join('.')}`, true);
      call.skip(...Object.keys(call.fields));
    });
    reader.skip('funcexpr', 'outargs');
  },
  DoStmt: refusedAlways('procedure', 'DO'),
  ListenStmt: refusedAlways('notify', 'LISTEN'),
  UnlistenStmt: refusedAlways('notify', 'UNLISTEN'),
  NotifyStmt: refusedAlways('notify', 'NOTIFY'),
  DiscardStmt: refusedAlways('setting', 'DISCARD'),
  DeclareCursorStmt: (ctx, reader) => {
    operand(ctx, reader.node('query'), 'DECLARE');
    // WITH HOLD (CURSOR_OPT_HOLD): the cursor outlives its transaction, so it stays on the upstream
    // connection after the session hands it back, where any later session could FETCH from it.
    const options = reader.fields.options;
    if (typeof options === 'number' && (options & CURSOR_OPT_HOLD) !== 0) ctx.out.unsupportedConstruct('DECLARE ... WITH HOLD');
    reader.skip('portalname', 'options');
  },
  FetchStmt: (_ctx, reader) => reader.skip('direction', 'howMany', 'portalname', 'ismove'),
  ClosePortalStmt: (_ctx, reader) => reader.skip('portalname'),
};
