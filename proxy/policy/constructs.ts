/**
 * Readable names for the constructs the analyzer refuses as unsupported. The walkers record what
 * they met as the parser names it (`RangeTableSample`, `TypeName.setof`); an agent reads SQL, so a
 * refusal names the SQL construct instead and, where there is one, what to write instead.
 */
interface Construct {
  readonly sql: string;
  readonly instead?: string;
}

const CONSTRUCTS: Readonly<Record<string, Construct>> = {
  RangeTableFunc: { sql: 'XMLTABLE' },
  RangeTableFuncCol: { sql: 'an XMLTABLE column' },
  JsonTable: { sql: 'JSON_TABLE', instead: 'Use jsonb_to_recordset(...) AS x(col type, ...) or jsonb_array_elements.' },
  XmlExpr: { sql: 'an XML function (xmlelement, xmlforest, xmlpi, ...)' },
  XmlSerialize: { sql: 'XMLSERIALIZE' },
  JsonObjectConstructor: { sql: 'JSON_OBJECT(...)', instead: 'Use jsonb_build_object(...).' },
  JsonArrayConstructor: { sql: 'JSON_ARRAY(...)', instead: 'Use jsonb_build_array(...).' },
  JsonArrayQueryConstructor: { sql: 'JSON_ARRAY(query)', instead: 'Use jsonb_agg(...) over the query.' },
  JsonObjectAgg: { sql: 'JSON_OBJECTAGG', instead: 'Use jsonb_object_agg(...).' },
  JsonArrayAgg: { sql: 'JSON_ARRAYAGG', instead: 'Use jsonb_agg(...).' },
  JsonIsPredicate: { sql: 'IS JSON', instead: 'Use jsonb_typeof(...).' },
  JsonFuncExpr: { sql: 'JSON_QUERY, JSON_VALUE or JSON_EXISTS', instead: 'Use jsonb_path_query_first, jsonb_path_exists or the -> and ->> operators.' },
  JsonParseExpr: { sql: 'JSON(...)', instead: "Cast to jsonb: '...'::jsonb." },
  JsonScalarExpr: { sql: 'JSON_SCALAR(...)', instead: 'Use to_jsonb(...).' },
  JsonSerializeExpr: { sql: 'JSON_SERIALIZE(...)', instead: 'Cast the value to text.' },
  CurrentOfExpr: { sql: 'WHERE CURRENT OF' },
  MergeStmt: { sql: 'MERGE', instead: 'Use INSERT ... ON CONFLICT, UPDATE or DELETE.' },
  NamedArgExpr: { sql: 'a named argument (name => value)' },
  GroupingFunc: { sql: 'GROUPING(...)' },
  RowCompareExpr: { sql: 'a row comparison' },
  LockingClause: { sql: 'FOR UPDATE / FOR SHARE' },
  IntoClause: { sql: 'INTO' },
  WithClause: { sql: 'WITH' },
  CommonTableExpr: { sql: 'a WITH query' },
  RangeFunction: { sql: 'a function in FROM' },
  RangeSubselect: { sql: 'a subquery in FROM' },
  RangeVar: { sql: 'a table name' },
  JoinExpr: { sql: 'a JOIN' },
  SubLink: { sql: 'a subquery' },
  FuncCall: { sql: 'a function call' },
  ColumnRef: { sql: 'a column reference' },
  ResTarget: { sql: 'a select-list or SET item' },
  SortBy: { sql: 'an ORDER BY item' },
  WindowDef: { sql: 'a window definition (OVER ...)' },
  ColumnDef: { sql: 'a column definition' },
  Constraint: { sql: 'a constraint' },
  IndexElem: { sql: 'an index column' },
  DefElem: { sql: 'an option' },
  A_Expr: { sql: 'an operator expression' },
  A_Const: { sql: 'a constant' },
  A_Indirection: { sql: 'a subscript or field selection' },
  TypeCast: { sql: 'a cast' },
  TypeName: { sql: 'a type name' },
  CollateClause: { sql: 'COLLATE' },
  ParamRef: { sql: 'a parameter ($n)' },
  Alias: { sql: 'an alias' },
  OnConflictClause: { sql: 'ON CONFLICT' },
  InferClause: { sql: 'an ON CONFLICT target' },
  SelectStmt: { sql: 'SELECT' },
  InsertStmt: { sql: 'INSERT' },
  UpdateStmt: { sql: 'UPDATE' },
  DeleteStmt: { sql: 'DELETE' },
  SetToDefault: { sql: 'DEFAULT' },
  MultiAssignRef: { sql: 'a multi-column assignment' },
};

/** An unknown parser name as SQL words: CreateFunctionStmt is CREATE FUNCTION, AddColumn is ADD COLUMN. */
function words(type: string): string {
  return type
    .replace(/Stmt$/, '')
    .replace(/_/g, ' ')
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .toUpperCase();
}

const describeNode = (type: string): Construct => CONSTRUCTS[type] ?? { sql: words(type) };

/** A parser name: capitalized, with a lower-case letter (SQL keywords are all capitals). */
const isNodeName = (word: string): boolean => /^[A-Z][A-Za-z]*(?:_[A-Z][A-Za-z]*)?$/.test(word) && /[a-z]/.test(word);

/**
 * What an unsupported entry means in SQL. Entries are either already readable (`DECLARE ... WITH
 * HOLD`), a node type (`RangeTableSample`), a node's field (`TypeName.setof`), or parser names
 * among words (`EXPLAIN option ...`, `ALTER TABLE AddColumn`, `... outside the analyzed clauses`).
 */
export function describeConstruct(what: string): Construct {
  if (what === 'TypeName.setof') return { sql: 'SETOF or %TYPE in a type name' };
  const dot = what.indexOf('.');
  if (dot > 0 && !what.includes(' ') && isNodeName(what.slice(0, dot))) {
    return { sql: `a form of ${describeNode(what.slice(0, dot)).sql} the analyzer does not support` };
  }
  if (isNodeName(what)) return describeNode(what);
  return { sql: what.split(' ').map((word) => (isNodeName(word) ? describeNode(word).sql : word)).join(' ') };
}
