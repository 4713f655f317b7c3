/**
 * A held statement on the wire's extended protocol (Parse, Bind, Execute): what its approval is
 * bound to of the Bind that names its parameters.
 */
import { paramFormat, type Bind, type FormatCode } from './protocol/frontend.js';

/** A Bind's parameters as an approval binds them, and as a trial run can send them. */
export interface BoundParams {
  /** Each value's bytes as sent, in hex (byte for byte, whatever its format); null is SQL NULL. */
  readonly params: readonly (string | null)[];
  readonly formats: readonly FormatCode[];
  /** The values as text for a trial run; undefined when one is binary (no estimate is made). */
  readonly text: readonly (string | null)[] | undefined;
}

export function boundParams(bind: Bind): BoundParams {
  const formats = bind.params.map((_, index) => paramFormat(bind, index));
  const params = bind.params.map((value) => (value === null ? null : value.toString('hex')));
  const text = formats.includes(1) ? undefined : bind.params.map((value) => (value === null ? null : value.toString('utf8')));
  return { params, formats, text };
}
