import type { Collector } from './analysis.js';
import { Reader, type At } from './ast.js';
import type { Level } from './scope.js';

/** How a nested query's output is consumed. */
export interface QueryOptions {
  /** False for an EXISTS subquery: its select list is never evaluated into a value. */
  readonly observable: boolean;
}

/** What the walkers share for one statement. `query` is injected so expressions and queries need not import each other. */
export interface Ctx {
  readonly out: Collector;
  /** False inside DDL and other places where a column name cannot be replaced by an expression. */
  readonly rewritable: boolean;
  readonly query: (ctx: Ctx, parent: Level | null, at: At, options?: QueryOptions) => void;
}

/** Reports the fields of a node nobody consumed: fail closed on anything the walker was not written for. */
export function finish(ctx: Ctx, reader: Reader): void {
  for (const key of reader.leftovers()) ctx.out.unsupportedConstruct(`${reader.type}.${key}`);
}

/** Reads a wrapped node, marks it visited, runs `body` and then refuses unknown fields. */
export function visit(ctx: Ctx, at: At, body: (reader: Reader) => void): void {
  const reader = Reader.of(at);
  ctx.out.visited.add(reader.fields);
  body(reader);
  finish(ctx, reader);
}
