/**
 * Reading libpg_query's JSON parse tree. A node is `{ TypeName: fields }`; struct-typed fields
 * (a RangeVar in `relation`, an Alias) hold bare `fields`. Fields equal to their default are
 * omitted, so a field that is present always means something: the analyzer consumes every key
 * through a Reader and refuses any it was not written to understand.
 */

export type Fields = Record<string, unknown>;
export type Node = Record<string, unknown>;
/** Keys and indexes from the statement node to a slot in the tree. */
export type Path = readonly (string | number)[];

/**
 * A slot in the tree as a link to its parent slot; null is the statement node itself. The walk
 * visits every node but records few paths, so a path is built only when it is recorded.
 */
export interface Slot {
  readonly parent: Slot | null;
  readonly key: string | number;
}

/** The slot `keys` below `slot`. */
export function below(slot: Slot | null, ...keys: (string | number)[]): Slot | null {
  let current = slot;
  for (const key of keys) current = { parent: current, key };
  return current;
}

export function pathOf(slot: Slot | null): Path {
  const path: (string | number)[] = [];
  for (let current = slot; current !== null; current = current.parent) path.push(current.key);
  return path.reverse();
}

/** A wrapped node and where it sits. */
export interface At {
  readonly node: Node;
  readonly slot: Slot | null;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The node's type (its only key), or '' for the empty placeholder `{}` the parser emits for a null list item. */
export function nodeType(node: Node): string {
  const keys = Object.keys(node);
  return keys.length === 1 ? (keys[0] ?? '') : '';
}

export class Reader {
  private readonly used: string[] = [];

  private constructor(
    readonly type: string,
    readonly fields: Fields,
    /** Slot of the fields object itself. */
    readonly slot: Slot | null,
  ) {}

  static of(at: At): Reader {
    const type = nodeType(at.node);
    const fields = at.node[type];
    return new Reader(type, isObject(fields) ? fields : {}, { parent: at.slot, key: type });
  }

  static struct(type: string, fields: Fields, slot: Slot | null): Reader {
    return new Reader(type, fields, slot);
  }

  has(key: string): boolean {
    return this.fields[key] !== undefined;
  }

  node(key: string): At | undefined {
    this.used.push(key);
    const value = this.fields[key];
    return isObject(value) ? { node: value, slot: { parent: this.slot, key } } : undefined;
  }

  list(key: string): At[] {
    this.used.push(key);
    const value = this.fields[key];
    const items: At[] = [];
    if (!Array.isArray(value)) return items;
    const parent: Slot = { parent: this.slot, key };
    for (let index = 0; index < value.length; index++) {
      const item: unknown = value[index];
      if (isObject(item)) items.push({ node: item, slot: { parent, key: index } });
    }
    return items;
  }

  struct(key: string, type: string): Reader | undefined {
    this.used.push(key);
    const value = this.fields[key];
    return isObject(value) ? Reader.struct(type, value, { parent: this.slot, key }) : undefined;
  }

  string(key: string): string | undefined {
    this.used.push(key);
    const value = this.fields[key];
    return typeof value === 'string' ? value : undefined;
  }

  bool(key: string): boolean {
    this.used.push(key);
    return this.fields[key] === true;
  }

  /** Fields that carry no names, expressions or behaviour the policy cares about (locations, formats). */
  skip(...keys: string[]): void {
    for (const key of keys) this.used.push(key);
  }

  /** Present fields nobody consumed. */
  leftovers(): string[] {
    return Object.keys(this.fields).filter((key) => !this.used.includes(key));
  }
}

/** The `sval` strings of a list of String nodes (qualified names, column lists). */
export function names(items: readonly At[]): string[] {
  return items.map((item) => stringValue(item.node) ?? '');
}

export function stringValue(node: Node): string | undefined {
  const inner = node.String;
  return isObject(inner) && typeof inner.sval === 'string' ? inner.sval : undefined;
}

/**
 * The text of a constant argument (A_Const, String, or a cast constant), as SET and option values
 * are written; undefined for anything else. Integer zero and `false` are omitted fields in the tree.
 */
export function constantText(node: Node): string | undefined {
  const str = stringValue(node);
  if (str !== undefined) return str;
  if (isObject(node.TypeCast) && isObject(node.TypeCast.arg)) return constantText(node.TypeCast.arg);
  const value = node.A_Const;
  if (!isObject(value)) return undefined;
  if (isObject(value.sval)) return typeof value.sval.sval === 'string' ? value.sval.sval : '';
  if (isObject(value.ival)) return String(value.ival.ival ?? 0);
  if (isObject(value.fval)) return String(value.fval.fval ?? '0');
  if (isObject(value.boolval)) return value.boolval.boolval === true ? 'true' : 'false';
  if (isObject(value.bsval)) return String(value.bsval.bsval ?? '');
  return undefined;
}

/** Whether an option's value turns it on: a bare option (no value), or one that is not plainly off. */
export function isOn(value: string | undefined): boolean {
  return value === undefined || ['true', 'on', '1', 'yes'].includes(value);
}

/**
 * Whether a DefElem option list (`EXPLAIN (ANALYZE)`, `VACUUM FULL`, `REINDEX (CONCURRENTLY)`)
 * turns option `name` on. A value that is not a constant (`ANALYZE 0` is an Integer node) counts
 * as on, so a caller that must fail closed treats it as set.
 */
export function optionOn(options: unknown, name: string): boolean {
  if (!Array.isArray(options)) return false;
  return options.some((item: unknown) => {
    const option = isObject(item) && isObject(item.DefElem) ? item.DefElem : undefined;
    if (!option || String(option.defname).toLowerCase() !== name) return false;
    return isOn(isObject(option.arg) ? constantText(option.arg)?.toLowerCase() : undefined);
  });
}

/** A deep copy of a parse tree (plain JSON data, whose keys are libpg_query's field names); several times faster than a JSON round trip. */
export function cloneTree<T>(tree: T): T {
  if (Array.isArray(tree)) return tree.map(cloneTree) as T;
  if (!isObject(tree)) return tree;
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(tree)) copy[key] = cloneTree(tree[key]);
  return copy as T;
}

/** The object at `path` below `root`. */
export function getAt(root: unknown, path: Path): unknown {
  let current = root;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string | number, unknown>)[key];
  }
  return current;
}
