import type { PolicyStatementKind } from '../../src/events/policies.js';
import { isObject, nodeType, optionOn, type Node } from './ast.js';
import { statementShape } from './statements.js';

/** Data-modifying statements, which may also sit inside another statement (a WITH query, a COPY or EXPLAIN ANALYZE operand). */
const NESTED_WRITES: Readonly<Record<string, PolicyStatementKind>> = { InsertStmt: 'insert', UpdateStmt: 'update', DeleteStmt: 'delete', MergeStmt: 'merge' };

/** Statements whose `query` operand runs (or, for PREPARE, is prepared to run) when they do. */
const OPERAND_HOLDERS: ReadonlySet<string> = new Set(['ExplainStmt', 'PrepareStmt', 'DeclareCursorStmt', 'CopyStmt', 'CreateTableAsStmt']);

/**
 * Every statement kind a statement runs: its own, its operand's (EXPLAIN ANALYZE, PREPARE,
 * DECLARE, COPY (query), CREATE TABLE AS), and that of every data-modifying statement inside it at
 * any depth, so `WITH x AS (DELETE ...) SELECT` is a select and a delete, and `INSERT ... ON CONFLICT DO
 * UPDATE` an insert and an update. EXPLAIN without ANALYZE
 * runs nothing: it is an explain only. `SELECT ... INTO` creates a table: it is also ddl. Pure.
 */
export function statementKinds(stmt: Node): PolicyStatementKind[] {
  const kinds = new Set<PolicyStatementKind>();
  collect(stmt, kinds);
  return [...kinds];
}

function collect(stmt: Node, kinds: Set<PolicyStatementKind>): void {
  const type = nodeType(stmt);
  const fields = stmt[type];
  kinds.add(statementShape(type).kind);
  if (!isObject(fields)) return;
  if (type === 'SelectStmt' && fields.intoClause !== undefined) kinds.add('ddl');
  if (type === 'ExplainStmt' && !optionOn(fields.options, 'analyze')) return;
  if (OPERAND_HOLDERS.has(type) && isObject(fields.query)) collect(fields.query, kinds);
  nestedWrites(fields, kinds);
}

function nestedWrites(tree: unknown, kinds: Set<PolicyStatementKind>): void {
  if (Array.isArray(tree)) {
    for (const item of tree) nestedWrites(item, kinds);
    return;
  }
  if (!isObject(tree)) return;
  for (const key of Object.keys(tree)) {
    const kind = NESTED_WRITES[key];
    if (kind !== undefined) kinds.add(kind);
    // INSERT ... ON CONFLICT DO UPDATE updates the rows it conflicts with (PostgreSQL asks for UPDATE privilege): an update too.
    if (isUpsert(key, tree[key])) kinds.add('update');
    nestedWrites(tree[key], kinds);
  }
}

const isUpsert = (key: string, value: unknown): boolean => key === 'onConflictClause' && isObject(value) && value.action === 'ONCONFLICT_UPDATE';

/** Whether the tree holds an `INSERT ... ON CONFLICT DO UPDATE` at any depth (a refusal says so). */
export function upserts(tree: unknown): boolean {
  if (Array.isArray(tree)) return tree.some(upserts);
  if (!isObject(tree)) return false;
  return Object.entries(tree).some(([key, value]) => isUpsert(key, value) || upserts(value));
}
