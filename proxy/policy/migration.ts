import { isObject, nodeType, optionOn, stringValue, type Fields, type Node } from './ast.js';

/**
 * A lock-heavy schema change: one that blocks reads or writes of a table for as long as it scans,
 * rewrites or indexes it, or holds a strong lock until its transaction ends. What a policy's
 * `migration_safety` flags (warn) or refuses (block).
 */
export interface MigrationFinding {
  /** `migration_safety.<form>`. */
  readonly rule: string;
  /** What the statement does, as written: `CREATE INDEX without CONCURRENTLY on orders`. */
  readonly what: string;
  /** The lock it takes and what that blocks. */
  readonly risk: string;
  /** The safe alternative. */
  readonly instead: string;
}

const ACCESS_EXCLUSIVE = 'takes an ACCESS EXCLUSIVE lock that blocks every read and write of the table';
const REWRITE = `rewrites the whole table and its indexes, and ${ACCESS_EXCLUSIVE} until it is done`;
const BACKFILL = 'add the column without a default (or with a constant one), fill it in batches of UPDATEs, then ALTER COLUMN ... SET DEFAULT for new rows';
const NOT_VALID = 'add it NOT VALID (new and changed rows are checked at once), then ALTER TABLE ... VALIDATE CONSTRAINT in its own statement, which lets reads and writes through while it checks the existing rows';
const UNIQUE_INDEX = 'CREATE UNIQUE INDEX CONCURRENTLY first (outside a transaction block), then ADD CONSTRAINT ... PRIMARY KEY|UNIQUE USING INDEX';

/** LockStmt.mode, PostgreSQL's lock mode numbers; SHARE (5) and above block writes. */
const LOCK_MODES = ['', 'ACCESS SHARE', 'ROW SHARE', 'ROW EXCLUSIVE', 'SHARE UPDATE EXCLUSIVE', 'SHARE', 'SHARE ROW EXCLUSIVE', 'EXCLUSIVE', 'ACCESS EXCLUSIVE'];
const SHARE_LOCK = 5;

/** Types whose columns get a sequence's nextval() as default: adding one fills every row. */
const SERIAL_TYPES: ReadonlySet<string> = new Set(['serial', 'bigserial', 'smallserial', 'serial2', 'serial4', 'serial8']);

/**
 * Functions a column default may call and still be non-volatile (evaluated once, stored in the
 * catalog, no rewrite since PostgreSQL 11). Any other call may be volatile and is taken as one.
 */
const NON_VOLATILE_CALLS: ReadonlySet<string> = new Set(['now', 'transaction_timestamp', 'statement_timestamp', 'current_date', 'lower', 'upper', 'concat']);

function fieldsOf(node: unknown, type: string): Fields | undefined {
  return isObject(node) && isObject(node[type]) ? node[type] : undefined;
}

function relationName(fields: Fields): string {
  const relation = isObject(fields.relation) ? fields.relation : {};
  const schema = typeof relation.schemaname === 'string' ? `${relation.schemaname}.` : '';
  return `${schema}${String(relation.relname ?? '')}`;
}

function lastName(items: unknown): string {
  const list = Array.isArray(items) ? (items as Node[]) : [];
  const last = list[list.length - 1];
  return (last && stringValue(last)?.toLowerCase()) ?? '';
}

/** Whether a default expression is known non-volatile: constants, casts, operators, CURRENT_* values and the calls above. */
function nonVolatile(tree: unknown): boolean {
  if (Array.isArray(tree)) return tree.every(nonVolatile);
  if (!isObject(tree)) return true;
  for (const key of Object.keys(tree)) {
    if (key === 'SubLink') return false;
    if (key === 'FuncCall') {
      const call = fieldsOf(tree, 'FuncCall')!;
      if (!NON_VOLATILE_CALLS.has(lastName(call.funcname))) return false;
    }
    if (!nonVolatile(tree[key])) return false;
  }
  return true;
}

function constraintsOf(column: Fields): Fields[] {
  const items: unknown[] = Array.isArray(column.constraints) ? column.constraints : [];
  return items.flatMap((item) => {
    const constraint = fieldsOf(item, 'Constraint');
    return constraint ? [constraint] : [];
  });
}

/** Why adding `column` fills every row (a rewrite), if it does. */
function fills(column: Fields, constraints: readonly Fields[]): string | undefined {
  const type = isObject(column.typeName) ? lastName(column.typeName.names) : '';
  if (SERIAL_TYPES.has(type)) return `of type ${type}`;
  if (constraints.some((c) => c.contype === 'CONSTR_IDENTITY')) return 'GENERATED AS IDENTITY';
  if (constraints.some((c) => c.contype === 'CONSTR_GENERATED')) return 'GENERATED ALWAYS AS (...) STORED';
  const volatile = constraints.some((c) => c.contype === 'CONSTR_DEFAULT' && !nonVolatile(c.raw_expr)) || (column.raw_default !== undefined && !nonVolatile(column.raw_default));
  return volatile ? 'with a volatile default (one the gateway cannot prove non-volatile)' : undefined;
}

/** ADD COLUMN: what makes it fill or check every row under its lock, if anything. */
function addColumn(table: string, column: Fields): MigrationFinding | undefined {
  const name = String(column.colname ?? '');
  const constraints = constraintsOf(column);
  const filled = fills(column, constraints);
  if (filled) return { rule: 'migration_safety.add_column_rewrite', what: `ALTER TABLE ${table} ADD COLUMN ${name} ${filled}`, risk: REWRITE, instead: BACKFILL };
  const checked = constraints.find((c) => ['CONSTR_CHECK', 'CONSTR_FOREIGN', 'CONSTR_PRIMARY', 'CONSTR_UNIQUE', 'CONSTR_EXCLUSION'].includes(String(c.contype)));
  if (!checked) return undefined;
  return {
    rule: 'migration_safety.add_column_constraint',
    what: `ALTER TABLE ${table} ADD COLUMN ${name} with an inline ${constraintName(checked)} constraint`,
    risk: `checks or indexes every row while it ${ACCESS_EXCLUSIVE}`,
    instead: `add the column alone, then the constraint: ${checked.contype === 'CONSTR_CHECK' || checked.contype === 'CONSTR_FOREIGN' ? NOT_VALID : UNIQUE_INDEX}`,
  };
}

function constraintName(constraint: Fields): string {
  return String(constraint.contype).replace(/^CONSTR_/, '').replace('FOREIGN', 'FOREIGN KEY').replace('PRIMARY', 'PRIMARY KEY').replace('EXCLUSION', 'EXCLUDE');
}

/** ADD CONSTRAINT: validated in place, or building an index under the table's lock. */
function addConstraint(table: string, constraint: Fields): MigrationFinding | undefined {
  const kind = constraintName(constraint);
  if ((constraint.contype === 'CONSTR_CHECK' || constraint.contype === 'CONSTR_FOREIGN') && constraint.skip_validation !== true) {
    const lock = constraint.contype === 'CONSTR_CHECK' ? ACCESS_EXCLUSIVE : 'takes a SHARE ROW EXCLUSIVE lock that blocks every write of both tables';
    return { rule: 'migration_safety.add_constraint', what: `ALTER TABLE ${table} ADD ${kind} without NOT VALID`, risk: `checks every existing row while it ${lock}`, instead: NOT_VALID };
  }
  if (['CONSTR_PRIMARY', 'CONSTR_UNIQUE', 'CONSTR_EXCLUSION'].includes(String(constraint.contype)) && constraint.indexname === undefined) {
    return {
      rule: 'migration_safety.add_index_constraint',
      what: `ALTER TABLE ${table} ADD ${kind}${constraint.contype === 'CONSTR_EXCLUSION' ? '' : ' without USING INDEX'}`,
      risk: `builds an index of every row while it ${ACCESS_EXCLUSIVE}`,
      instead: constraint.contype === 'CONSTR_EXCLUSION' ? 'no online form exists: run it in a maintenance window' : UNIQUE_INDEX,
    };
  }
  return undefined;
}

const REWRITING_COMMANDS: Readonly<Record<string, string>> = { AT_SetTableSpace: 'SET TABLESPACE', AT_SetLogged: 'SET LOGGED', AT_SetUnLogged: 'SET UNLOGGED' };

function alterCommand(table: string, command: Fields): MigrationFinding | undefined {
  const subtype = String(command.subtype ?? '');
  const column = String(command.name ?? '');
  switch (subtype) {
    case 'AT_AddColumn': {
      const def = fieldsOf(command.def, 'ColumnDef');
      return def && addColumn(table, def);
    }
    case 'AT_AddConstraint': {
      const def = fieldsOf(command.def, 'Constraint');
      return def && addConstraint(table, def);
    }
    case 'AT_AlterColumnType':
      return {
        rule: 'migration_safety.alter_column_type',
        what: `ALTER TABLE ${table} ALTER COLUMN ${column} TYPE`,
        risk: `${REWRITE} (unless the old type converts to the new one without a rewrite, which the gateway cannot tell)`,
        instead: 'add a column of the new type, fill it in batches of UPDATEs, then switch readers and writers to it',
      };
    case 'AT_SetNotNull':
      return {
        rule: 'migration_safety.set_not_null',
        what: `ALTER TABLE ${table} ALTER COLUMN ${column} SET NOT NULL`,
        risk: `scans every row while it ${ACCESS_EXCLUSIVE}`,
        instead: `ADD CONSTRAINT ${column}_not_null CHECK (${column} IS NOT NULL) NOT VALID, then VALIDATE CONSTRAINT ${column}_not_null: the validated check refuses NULLs just the same, and is checked without blocking reads or writes`,
      };
    default: {
      const form = REWRITING_COMMANDS[subtype];
      if (form === undefined) return undefined;
      return { rule: 'migration_safety.alter_table_rewrite', what: `ALTER TABLE ${table} ${form}`, risk: REWRITE, instead: 'no online form exists: run it in a maintenance window' };
    }
  }
}

type Classifier = (fields: Fields) => MigrationFinding | readonly MigrationFinding[] | undefined;

const CLASSIFIERS: Readonly<Record<string, Classifier>> = {
  IndexStmt: (fields) =>
    fields.concurrent === true
      ? undefined
      : {
          rule: 'migration_safety.create_index',
          what: `CREATE INDEX without CONCURRENTLY on ${relationName(fields)}`,
          risk: 'takes a SHARE lock that blocks every INSERT, UPDATE and DELETE of the table for the whole build',
          instead: 'use CREATE INDEX CONCURRENTLY (outside a transaction block), which lets writes through while it builds',
        },
  AlterTableStmt: (fields) => {
    const table = relationName(fields);
    const commands = Array.isArray(fields.cmds) ? fields.cmds : [];
    return commands.flatMap((command) => {
      const finding = alterCommand(table, fieldsOf(command, 'AlterTableCmd') ?? {});
      return finding ? [finding] : [];
    });
  },
  DropStmt: (fields) =>
    fields.removeType !== 'OBJECT_INDEX' || fields.concurrent === true
      ? undefined
      : {
          rule: 'migration_safety.drop_index',
          what: 'DROP INDEX without CONCURRENTLY',
          risk: 'takes an ACCESS EXCLUSIVE lock on its table, which waits behind every running query of the table and blocks every read and write queued behind it',
          instead: 'use DROP INDEX CONCURRENTLY (outside a transaction block)',
        },
  ReindexStmt: (fields) =>
    optionOn(fields.params, 'concurrently')
      ? undefined
      : {
          rule: 'migration_safety.reindex',
          what: 'REINDEX without CONCURRENTLY',
          risk: 'blocks every write of the table, and every read that uses the index, until it is done',
          instead: 'use REINDEX (CONCURRENTLY) ... (outside a transaction block)',
        },
  VacuumStmt: (fields) =>
    fields.is_vacuumcmd !== true || !optionOn(fields.options, 'full')
      ? undefined
      : { rule: 'migration_safety.vacuum_full', what: 'VACUUM FULL', risk: REWRITE, instead: 'use plain VACUUM, which blocks neither reads nor writes (pg_repack reclaims the space online)' },
  ClusterStmt: () => ({ rule: 'migration_safety.cluster', what: 'CLUSTER', risk: REWRITE, instead: 'no online form exists in SQL: run it in a maintenance window, or use pg_repack' }),
  RefreshMatViewStmt: (fields) =>
    fields.concurrent === true
      ? undefined
      : {
          rule: 'migration_safety.refresh_materialized_view',
          what: `REFRESH MATERIALIZED VIEW ${relationName(fields)} without CONCURRENTLY`,
          risk: ACCESS_EXCLUSIVE.replace('the table', 'the view'),
          instead: 'use REFRESH MATERIALIZED VIEW CONCURRENTLY (it needs a unique index on the view)',
        },
  LockStmt: (fields) => {
    const mode = typeof fields.mode === 'number' ? fields.mode : 0;
    if (mode < SHARE_LOCK) return undefined;
    return {
      rule: 'migration_safety.lock_table',
      what: `LOCK TABLE IN ${LOCK_MODES[mode] ?? 'ACCESS EXCLUSIVE'} MODE`,
      risk: `blocks every ${mode === LOCK_MODES.length - 1 ? 'read and write' : 'write'} of the table until the transaction ends`,
      instead: 'lock only the rows you change (SELECT ... FOR UPDATE), or take a mode that lets writes through (ROW EXCLUSIVE or SHARE UPDATE EXCLUSIVE)',
    };
  },
  TruncateStmt: () => ({
    rule: 'migration_safety.truncate',
    what: 'TRUNCATE',
    risk: `${ACCESS_EXCLUSIVE} until the transaction ends`,
    instead: 'DELETE the rows in batches (DELETE ... WHERE id IN (SELECT id ... LIMIT 1000)), which blocks no reader',
  }),
};

/**
 * The lock-heavy parts of one statement, in statement order; none for everything else (CREATE
 * TABLE, DROP TABLE, DROP COLUMN, SET DEFAULT, RENAME and the CONCURRENTLY and NOT VALID forms hold
 * their locks briefly). Pure: it reads the parse tree alone, so it cannot know the table's size or
 * whether a validated check already guarantees NOT NULL.
 */
export function migrationFindings(stmt: Node): MigrationFinding[] {
  const type = nodeType(stmt);
  const classify = CLASSIFIERS[type];
  const fields = stmt[type];
  if (!classify || !isObject(fields)) return [];
  const found = classify(fields);
  return found === undefined ? [] : Array.isArray(found) ? [...found] : [found as MigrationFinding];
}
