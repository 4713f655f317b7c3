import type { Collector } from './analysis.js';
import { constantText, isObject, type Node } from './ast.js';
import { resolveRelation } from './names.js';

/** Node types the analyzer must have walked itself; anything of these types left unvisited refuses the statement. */
const SENSITIVE: ReadonlySet<string> = new Set(['RangeVar', 'FuncCall', 'ColumnRef', 'SubLink', 'RangeFunction', 'RangeSubselect', 'CommonTableExpr']);

/** Only objects and arrays can hold nodes: scalars are never pushed for a visit. */
const isTree = (value: unknown): value is object => typeof value === 'object' && value !== null;

/**
 * The sweep after the walk: visits every object in the tree, refuses relation, function, column
 * reference and sublink nodes the walk never analyzed, records their relations (so allowed-table
 * and honeytoken checks still see them), and gathers every constant for value honeytokens.
 */
export function sweep(root: Node, out: Collector): string[] {
  const literals: string[] = [];
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (Array.isArray(value)) {
      for (const item of value) if (isTree(item)) stack.push(item);
      continue;
    }
    if (!isObject(value)) continue;
    for (const key of Object.keys(value)) {
      const inner = value[key];
      if (key === 'A_Const' && isObject(inner)) {
        const text = constantText({ A_Const: inner });
        if (text !== undefined) literals.push(text);
      }
      if (SENSITIVE.has(key) && isObject(inner)) check(key, inner, out);
      if (isTree(inner)) stack.push(inner);
    }
    // A struct-typed RangeVar (INSERT target, INTO, CALL) carries `relname` without a wrapper.
    if (typeof value.relname === 'string') check('RangeVar', value, out);
  }
  return literals;
}

function check(type: string, fields: Record<string, unknown>, out: Collector): void {
  if (out.visited.has(fields)) return;
  out.unsupportedConstruct(`${type} outside the analyzed clauses`);
  if (type === 'RangeVar' && typeof fields.relname === 'string') {
    const schema = typeof fields.schemaname === 'string' ? fields.schemaname : undefined;
    out.relations.push({ candidates: resolveRelation(schema, fields.relname, out.searchPath), written: false, text: schema ? `${schema}.${fields.relname}` : fields.relname });
  }
  out.visited.add(fields);
}
