import type { PolicyStatementKind } from '../../src/events/policies.js';
import { nodeType, type At } from './ast.js';
import { visit, type Ctx } from './context.js';
import { ddlHandlers } from './ddl.js';
import { dmlStatement } from './dml.js';
import { utilityHandlers } from './utility.js';

/** Each statement node's kind; the vocabulary of policies' statement_allow and statement_deny (POLICY_STATEMENT_KINDS). */
const KINDS: Readonly<Record<string, PolicyStatementKind>> = {
  SelectStmt: 'select',
  InsertStmt: 'insert',
  UpdateStmt: 'update',
  DeleteStmt: 'delete',
  MergeStmt: 'merge',
  CopyStmt: 'copy',
  ExplainStmt: 'explain',
  VariableSetStmt: 'set',
  VariableShowStmt: 'show',
  TransactionStmt: 'transaction',
  CallStmt: 'call',
  DoStmt: 'do',
  LockStmt: 'lock',
  ListenStmt: 'listen',
  UnlistenStmt: 'unlisten',
  NotifyStmt: 'notify',
  PrepareStmt: 'prepare',
  ExecuteStmt: 'execute',
  DeallocateStmt: 'deallocate',
  TruncateStmt: 'truncate',
  DiscardStmt: 'discard',
  DeclareCursorStmt: 'declare',
  FetchStmt: 'fetch',
  ClosePortalStmt: 'close',
};

/** Schema changes, privileges, maintenance: everything that is neither a query nor session control. */
const DDL = /^(Create|Alter|Drop|Grant|Revoke|Comment|Rename|Index|View|Rule|Define|Composite|Reassign|Refresh|Reindex|Cluster|Vacuum|SecLabel|Import|CheckPoint|Load|AlterSystem)/;

export interface StatementShape {
  readonly kind: PolicyStatementKind;
  readonly ddl: boolean;
}

export function statementShape(type: string): StatementShape {
  const kind = KINDS[type];
  if (kind) return { kind, ddl: false };
  return DDL.test(type) ? { kind: 'ddl', ddl: true } : { kind: 'other', ddl: false };
}

const DDL_VERBS: Readonly<Record<string, string>> = { CreateStmt: 'CREATE TABLE', IndexStmt: 'CREATE INDEX', RenameStmt: 'ALTER ... RENAME' };

/** `CreateFunctionStmt` → `CREATE FUNCTION`. */
function ddlVerb(type: string): string {
  return DDL_VERBS[type] ?? type.replace(/Stmt$/, '').replace(/([a-z])([A-Z])/g, '$1 $2').toUpperCase();
}

/** Analyzes one top-level statement into ctx.out. */
export function statement(ctx: Ctx, at: At): void {
  const type = nodeType(at.node);
  if (type === 'SelectStmt') return ctx.query(ctx, null, at);
  if (type === 'InsertStmt' || type === 'UpdateStmt' || type === 'DeleteStmt') return dmlStatement(ctx, null, at);
  const handler = utilityHandlers[type] ?? ddlHandlers[type];
  const shape = statementShape(type);
  if (type === 'MergeStmt') ctx.out.effect('write', 'MERGE');
  if (shape.ddl) ctx.out.effect('ddl', ddlVerb(type));
  if (handler) visit(ctx, at, (reader) => handler(shape.ddl ? { ...ctx, rewritable: false } : ctx, reader));
  else ctx.out.unsupportedConstruct(type || 'empty statement');
}
