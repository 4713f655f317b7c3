import { below, names, nodeType, pathOf, Reader, stringValue, type At, type Node, type Path } from './ast.js';
import { visit, type Ctx } from './context.js';
import { expr, struct, typeName } from './expressions.js';
import type { RelationName } from './names.js';
import type { Reach } from './inheritance.js';
import { relationUse } from './queries.js';
import { Level, tablesOf, type RangeEntry } from './scope.js';
import type { StatementHandler } from './utility.js';

/**
 * The DDL a write-capable policy may run (each flagged as a migration): plain tables, their
 * columns, constraints and indexes. Expressions in DDL cannot be masked (a CHECK or USING over a
 * masked column would turn its raw values into an error oracle), so every column they name is
 * recorded as not rewritable.
 */
function columnUse(ctx: Ctx, tables: readonly RelationName[], column: string, path: Path, written = false): void {
  if (tables.length > 0) ctx.out.columns.push({ candidates: tables.map((table) => ({ table, column })), path, rewritable: false, written, text: column });
}

function tableScope(entry: RangeEntry): Level {
  const level = new Level(null);
  level.entries.push(entry);
  return level;
}

function target(ctx: Ctx, reader: Reader, reach: Reach): { entry: RangeEntry; tables: RelationName[] } | undefined {
  const relation = reader.struct('relation', 'RangeVar');
  if (!relation) return undefined;
  const entry = relationUse(ctx, relation, true, reach);
  return { entry, tables: tablesOf(entry) };
}

const CONSTRAINT_FIELDS = [
  'contype', 'conname', 'deferrable', 'initdeferred', 'skip_validation', 'initially_valid', 'is_no_inherit', 'generated_when',
  'nulls_not_distinct', 'fk_matchtype', 'fk_upd_action', 'fk_del_action', 'location',
  // ADD CONSTRAINT ... USING INDEX: PostgreSQL requires an index of the same table.
  'indexname',
];

function constraint(ctx: Ctx, at: At, level: Level, tables: readonly RelationName[]): void {
  visit(ctx, at, (reader) => {
    reader.skip(...CONSTRAINT_FIELDS);
    expr(ctx, level, reader.node('raw_expr'));
    for (const key of ['keys', 'including', 'fk_attrs']) {
      for (const item of reader.list(key)) columnUse(ctx, tables, names([item])[0] ?? '', pathOf(item.slot));
    }
    const referenced = reader.struct('pktable', 'RangeVar');
    if (referenced) relationUse(ctx, referenced, false, 'self');
    reader.skip('pk_attrs');
  });
}

function columnDef(ctx: Ctx, at: At, level: Level, tables: readonly RelationName[]): void {
  if (nodeType(at.node) !== 'ColumnDef') {
    ctx.out.unsupportedConstruct(nodeType(at.node));
    return;
  }
  visit(ctx, at, (reader) => {
    const column = reader.string('colname');
    if (column !== undefined) columnUse(ctx, tables, column, pathOf(at.slot), true);
    struct(ctx, reader, 'typeName', 'TypeName', (type) => typeName(ctx, level, type));
    expr(ctx, level, reader.node('raw_default'));
    for (const item of reader.list('constraints')) constraint(ctx, item, level, tables);
    reader.skip('is_local', 'location');
  });
}

function tableElement(ctx: Ctx, at: At, level: Level, tables: readonly RelationName[]): void {
  if (nodeType(at.node) === 'Constraint') constraint(ctx, at, level, tables);
  else columnDef(ctx, at, level, tables);
}

const ALTER_COMMANDS: ReadonlySet<string> = new Set([
  'AT_AddColumn', 'AT_DropColumn', 'AT_ColumnDefault', 'AT_SetNotNull', 'AT_DropNotNull', 'AT_AlterColumnType', 'AT_AddConstraint',
  'AT_DropConstraint', 'AT_ValidateConstraint',
]);

/** Commands whose `name` is a constraint's, not a column's. */
const CONSTRAINT_COMMANDS: ReadonlySet<string> = new Set(['AT_DropConstraint', 'AT_ValidateConstraint']);

function alterCommand(ctx: Ctx, at: At, level: Level, tables: readonly RelationName[]): void {
  visit(ctx, at, (reader) => {
    const subtype = reader.string('subtype') ?? '';
    if (!ALTER_COMMANDS.has(subtype)) ctx.out.unsupportedConstruct(`ALTER TABLE ${subtype.replace(/^AT_/, '')}`);
    const column = reader.string('name');
    if (column !== undefined && !CONSTRAINT_COMMANDS.has(subtype)) columnUse(ctx, tables, column, pathOf(at.slot));
    const def = reader.node('def');
    // SET DEFAULT holds the default expression itself; DROP DEFAULT none.
    if (def && subtype === 'AT_ColumnDefault') expr(ctx, level, def);
    else if (def) tableElement(ctx, def, level, tables);
    // DROP COLUMN/CONSTRAINT ... CASCADE also drops views and foreign keys of other tables that depend on it.
    if (reader.string('behavior') === 'DROP_CASCADE') ctx.out.unsupportedConstruct(`ALTER TABLE ${subtype.replace(/^AT_/, '')} ... CASCADE`);
    reader.skip('missing_ok', 'num', 'recurse');
  });
}

function indexElements(ctx: Ctx, items: readonly At[], level: Level, tables: readonly RelationName[]): void {
  for (const item of items) {
    if (nodeType(item.node) !== 'IndexElem') {
      ctx.out.unsupportedConstruct(nodeType(item.node));
      continue;
    }
    visit(ctx, item, (element) => {
      const column = element.string('name');
      if (column !== undefined) columnUse(ctx, tables, column, pathOf(item.slot));
      expr(ctx, level, element.node('expr'));
      element.skip('ordering', 'nulls_ordering', 'collation', 'opclass', 'indexcolname');
    });
  }
}

export const ddlHandlers: Readonly<Record<string, StatementHandler>> = {
  CreateStmt: (ctx, reader) => {
    const table = target(ctx, reader, 'self');
    if (!table) return;
    const level = tableScope(table.entry);
    for (const element of reader.list('tableElts')) tableElement(ctx, element, level, table.tables);
    reader.skip('if_not_exists', 'oncommit');
  },
  AlterTableStmt: (ctx, reader) => {
    if (reader.string('objtype') !== 'OBJECT_TABLE') ctx.out.unsupportedConstruct('ALTER of anything but a table');
    const table = target(ctx, reader, 'children');
    reader.skip('missing_ok');
    if (!table) return;
    const level = tableScope(table.entry);
    for (const command of reader.list('cmds')) alterCommand(ctx, command, level, table.tables);
  },
  DropStmt: (ctx, reader) => {
    if (reader.string('removeType') !== 'OBJECT_TABLE') ctx.out.unsupportedConstruct('DROP of anything but a table');
    for (const object of reader.list('objects')) {
      ctx.out.visited.add(object.node);
      const parts = ((object.node.List as { items?: Node[] } | undefined)?.items ?? []).map((item) => stringValue(item) ?? '');
      relationUse(ctx, asRangeVar(parts.length > 1 ? parts[parts.length - 2] : undefined, parts[parts.length - 1] ?? ''), true, 'self');
    }
    // CASCADE also drops what depends on the table elsewhere: views, foreign keys of other tables.
    if (reader.string('behavior') === 'DROP_CASCADE') ctx.out.unsupportedConstruct('DROP ... CASCADE');
    reader.skip('missing_ok', 'concurrent');
  },
  IndexStmt: (ctx, reader) => {
    // An index on a plain-inheritance parent covers the parent alone.
    const table = target(ctx, reader, 'self');
    reader.skip('idxname', 'accessMethod', 'unique', 'nulls_not_distinct', 'concurrent', 'if_not_exists');
    if (!table) return;
    const level = tableScope(table.entry);
    indexElements(ctx, [...reader.list('indexParams'), ...reader.list('indexIncludingParams')], level, table.tables);
    expr(ctx, level, reader.node('whereClause'));
  },
  RenameStmt: (ctx, reader) => {
    const kind = reader.string('renameType');
    // Renaming a column renames it in the inheritance children too.
    const table = target(ctx, reader, kind === 'OBJECT_COLUMN' ? 'children' : 'self');
    const newname = reader.string('newname') ?? '';
    reader.skip('relationType', 'behavior', 'missing_ok');
    if (!table) return ctx.out.unsupportedConstruct(`RENAME of ${kind ?? 'object'}`);
    if (kind === 'OBJECT_TABLE') {
      // Masks and honeytokens are keyed by name: renaming their table would shed them.
      ctx.out.wholeRows.push({ tables: table.tables, form: 'rename', text: `RENAME TO ${newname}` });
      for (const { schema } of table.tables) relationUse(ctx, asRangeVar(schema, newname), true, 'self');
    } else if (kind === 'OBJECT_COLUMN') {
      columnUse(ctx, table.tables, reader.string('subname') ?? '', pathOf(below(reader.slot, 'subname')));
      columnUse(ctx, table.tables, newname, pathOf(below(reader.slot, 'newname')), true);
    } else ctx.out.unsupportedConstruct(`RENAME of ${kind ?? 'object'}`);
  },
};

/** A relation named by a string list rather than a RangeVar (DROP, RENAME TO). */
function asRangeVar(schema: string | undefined, relname: string): Reader {
  return Reader.struct('RangeVar', schema === undefined ? { relname } : { schemaname: schema, relname }, null);
}
