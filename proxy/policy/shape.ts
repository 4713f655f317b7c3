/**
 * The numeric shape of a query text: the text with every numeric constant replaced by a marker of
 * its class (an integer PostgreSQL's lexer makes ICONST, or any other number, FCONST). Two texts of
 * one shape lex to the same tokens but for those constants' values, so libpg_query gives them the
 * same parse tree but for those values and the nodes' locations.
 *
 * The scanner is deliberately narrow: it copies identifiers, quoted identifiers, standard strings,
 * `--` comments, parameters and operators verbatim, and gives up (undefined) on anything whose
 * lexing it does not mirror exactly: escape, bit, hex, national and Unicode strings, dollar quotes,
 * block comments, backslashes, non-ASCII and control characters, numbers with trailing junk,
 * underscores or a radix prefix. Texts without numbers get no shape: their exact text is the key.
 */

/** Markers cannot occur in a shape otherwise: control characters make the scanner give up. */
const INTEGER = '\u0001';
const OTHER_NUMBER = '\u0002';
const INT32_MAX = '2147483647';

export interface NumericShape {
  /** The text with each numeric constant as its class marker. */
  readonly key: string;
  /** The numeric constants: [start, end) offsets into the text, in order, and whether each is an integer constant. */
  readonly numbers: readonly NumberToken[];
}

interface NumberToken {
  readonly start: number;
  readonly end: number;
  readonly integer: boolean;
}

const isDigit = (code: number): boolean => code >= 48 && code <= 57;
const isIdentStart = (code: number): boolean => (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || code === 95;
const isIdentChar = (code: number): boolean => isIdentStart(code) || isDigit(code) || code === 36;
/** What may follow a number for the lexer to end it there: no letter, digit, underscore, dollar, dot or quote. */
const endsNumber = (code: number): boolean => Number.isNaN(code) || !(isIdentChar(code) || code === 46 || code === 39 || code === 34);
const SPACE = 1;
/** Operators and punctuation, copied as they are. */
const PLAIN = 2;
/** The class of each ASCII code: a table, not a set, since the scanner asks it of every character. */
const CLASS_OF = new Uint8Array(128);
for (const code of [32, 9, 10, 13]) CLASS_OF[code] = SPACE;
for (const c of '+-*/<>=~!@#%^&|`?(),;[]:.') CLASS_OF[c.charCodeAt(0)] = PLAIN;

/** The end of a quoted run starting at `start` (a quote doubled inside it is part of it), or -1 when it does not end. */
function quotedEnd(sql: string, start: number, quote: number): number {
  for (let i = start + 1; i < sql.length; i++) {
    const code = sql.charCodeAt(i);
    if (code === 92 || code < 32 || code > 126) {
      if (code !== 9 && code !== 10 && code !== 13) return -1;
    }
    if (code !== quote) continue;
    if (sql.charCodeAt(i + 1) === quote) i++;
    else return i + 1;
  }
  return -1;
}

/** The end of the number starting at `start`, and whether the lexer makes it an integer constant; undefined when the scanner cannot tell. */
function numberAt(sql: string, start: number): { end: number; integer: boolean } | undefined {
  let i = start;
  while (isDigit(sql.charCodeAt(i))) i++;
  let integer = true;
  if (sql.charCodeAt(i) === 46) {
    integer = false;
    i++;
    while (isDigit(sql.charCodeAt(i))) i++;
  }
  const exponent = sql.charCodeAt(i);
  if (exponent === 69 || exponent === 101) {
    integer = false;
    i++;
    const sign = sql.charCodeAt(i);
    if (sign === 43 || sign === 45) i++;
    if (!isDigit(sql.charCodeAt(i))) return undefined;
    while (isDigit(sql.charCodeAt(i))) i++;
  }
  if (!endsNumber(sql.charCodeAt(i))) return undefined;
  if (integer) {
    // Leading zeros do not count, but the last digit stays (0 is one digit).
    let first = start;
    while (first < i - 1 && sql.charCodeAt(first) === 48) first++;
    const digits = i - first;
    integer = digits < INT32_MAX.length || (digits === INT32_MAX.length && sql.slice(first, i) <= INT32_MAX);
  }
  return { end: i, integer };
}

let lastText: string | undefined;
let lastShape: NumericShape | undefined;

/** The shape of `sql`, or undefined when it has no number or the scanner gives up on it. The policy and the audit identity ask in turn about one text: the last answer is kept. */
export function numericShape(sql: string): NumericShape | undefined {
  if (sql !== lastText) {
    lastShape = scan(sql);
    lastText = sql;
  }
  return lastShape;
}

function scan(sql: string): NumericShape | undefined {
  const numbers: NumberToken[] = [];
  let key = '';
  let copied = 0;
  let i = 0;
  while (i < sql.length) {
    const code = sql.charCodeAt(i);
    if (CLASS_OF[code] === SPACE) i++;
    else if (isIdentStart(code)) {
      while (isIdentChar(sql.charCodeAt(i))) i++;
      // E'…', B'…', X'…', N'…' and U&'…' lex differently from a standard string.
      if (sql.charCodeAt(i) === 39 || sql.charCodeAt(i) === 38) return undefined;
    } else if (code === 39 || code === 34) {
      i = quotedEnd(sql, i, code);
      if (i < 0) return undefined;
    } else if (code === 36) {
      // A parameter ($1); anything else after a dollar may open a dollar-quoted string.
      i++;
      if (!isDigit(sql.charCodeAt(i))) return undefined;
      while (isDigit(sql.charCodeAt(i))) i++;
      if (isIdentChar(sql.charCodeAt(i))) return undefined;
    } else if (isDigit(code)) {
      const number = numberAt(sql, i);
      if (!number) return undefined;
      key += sql.slice(copied, i) + (number.integer ? INTEGER : OTHER_NUMBER);
      numbers.push({ start: i, end: number.end, integer: number.integer });
      i = copied = number.end;
    } else if (code === 45 && sql.charCodeAt(i + 1) === 45) {
      while (i < sql.length && sql.charCodeAt(i) !== 10) {
        const inner = sql.charCodeAt(i);
        if (inner < 32 && inner !== 9 && inner !== 13) return undefined;
        if (inner > 126) return undefined;
        i++;
      }
    } else if (code === 46 && isDigit(sql.charCodeAt(i + 1))) return undefined;
    else if (code === 47 && sql.charCodeAt(i + 1) === 42) return undefined;
    else if (CLASS_OF[code] === PLAIN) i++;
    else return undefined;
  }
  if (numbers.length === 0) return undefined;
  return { key: key + sql.slice(copied), numbers };
}

/** The text of each numeric constant of a shape, in order. */
export function numberTexts(sql: string, shape: NumericShape): string[] {
  return shape.numbers.map(({ start, end }) => sql.slice(start, end));
}

/** Each numeric constant as the deparser prints it: an integer constant's value in decimal (`007` is 7), others as written. */
export function deparsedNumberTexts(sql: string, shape: NumericShape): string[] {
  return shape.numbers.map(({ start, end, integer }) => (integer ? String(Number(sql.slice(start, end))) : sql.slice(start, end)));
}

/** The text with its shape's numeric constants replaced, in order, by `texts`. */
export function withNumbers(sql: string, shape: NumericShape, texts: readonly string[]): string {
  let out = '';
  let copied = 0;
  shape.numbers.forEach(({ start, end }, index) => {
    out += sql.slice(copied, start) + (texts[index] ?? sql.slice(start, end));
    copied = end;
  });
  return out + sql.slice(copied);
}

/** The text with each numeric constant of its shape changed to another of the same class (for checks that a result does not depend on them). */
export function withOtherNumbers(sql: string, shape: NumericShape): string {
  return withNumbers(
    sql,
    shape,
    shape.numbers.map(({ start, end, integer }) => {
      const text = sql.slice(start, end);
      return integer ? (text === '7' ? '8' : '7') : text === '7.5' ? '8.5' : '7.5';
    }),
  );
}

/**
 * Numbers of the same classes as the shape's, all different from each other and from the
 * originals: a rewrite that moves, drops or repeats a number gives itself away on them.
 */
export function distinctNumbers(sql: string, shape: NumericShape): string[] {
  return shape.numbers.map(({ start, end, integer }, index) => {
    const base = String(70_000 + index);
    const text = integer ? base : `${base}.5`;
    return text === sql.slice(start, end) ? (integer ? String(80_000 + index) : `${80_000 + index}.5`) : text;
  });
}

/**
 * The positions of a rewritten statement's numbers, when they are exactly the original's, in the
 * same order and spelled the same: then the rewrite of a text of the same shape is this rewrite
 * with that text's numbers put in (checked once per shape against a variant, see hook.ts).
 */
export function rewrittenNumbers(sql: string, shape: NumericShape, rewritten: string): NumericShape | undefined {
  const again = numericShape(rewritten);
  if (!again || again.numbers.length !== shape.numbers.length) return undefined;
  const texts = deparsedNumberTexts(sql, shape);
  return numberTexts(rewritten, again).every((text, index) => text === texts[index]) ? again : undefined;
}
