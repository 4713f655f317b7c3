import type { StatementDecision } from './policy/hook.js';
import { decodeFrontendMessage, type FrontendMessage, type MessageFrame } from './protocol/frontend.js';
import { renameParse, replaceParseSql } from './protocol/rename.js';
import { serverStatementName } from './prepared.js';
import type { Allowed, StatementRefusal } from './session-audit.js';
import type { UpstreamConnection } from './upstream/connection.js';

/** The client's unnamed statement: also the Parse that prepares it, to prepare it again on another connection. */
export interface Unnamed extends Allowed {
  readonly parse: Buffer;
}

export interface Prepared extends Allowed {
  readonly serverName: string;
  readonly parse: Buffer;
}

/** Parse messages up to this size are remembered (a copy) for the next Parse of the same bytes. */
const PARSE_MEMO_BYTES = 8 * 1024;

/** The last Parse rewritten to each decision's text (a masked statement's), and the client's Parse it came from. */
const rewrittenParses = new WeakMap<Allowed['decision'], { readonly raw: Buffer; readonly parse: Buffer }>();

/** The Parse to send for a client's Parse: as sent, or carrying the decision's text; comparing bytes costs less than rewriting. */
export function parseToRun(raw: Buffer, sql: string, decision: Allowed['decision']): Buffer {
  if (decision.sql === sql) return raw;
  const known = rewrittenParses.get(decision);
  if (known?.raw.equals(raw)) return known.parse;
  const parse = replaceParseSql(raw, decision.sql);
  // A copy: `raw` is a view into the client's chunk, which should not be kept alive for it.
  if (raw.length <= PARSE_MEMO_BYTES) rewrittenParses.set(decision, { raw: Buffer.from(raw), parse });
  return parse;
}

/** The refusal of a prepared statement the policy now allows as another text (a new mask): it needs a new Parse. */
export function policyChanged(name: string, decision: Extract<StatementDecision, { action: 'allow' }>): StatementRefusal {
  return {
    event: 'blocked',
    rule: 'policy.changed',
    reason: `this credential’s policy changed since ${name === '' ? 'the unnamed statement' : `statement "${name}"`} was prepared, and it would now run differently (rule policy.changed); close it and prepare it again`,
    sqlstate: '0A000',
    kind: decision.statementKind,
    tablesRead: decision.tablesRead,
    tablesWritten: decision.tablesWritten,
    tablesBlocked: [],
  };
}

/** The extended-protocol statements and portals a session's client made, each with the decision it runs under. */
export class SessionStatements {
  /** The client's named statements: their text and the server-side name they are prepared under. */
  readonly named = new Map<string, Prepared>();
  unnamed: Unnamed | undefined;
  /**
   * The connection the unnamed statement was last prepared on, while this session has held it since:
   * any other connection's unnamed statement is another session's, never to be bound.
   */
  unnamedOn: UpstreamConnection | undefined;
  readonly portals = new Map<string, Allowed | undefined>();
  private lastParse: FrontendMessage | undefined;

  /**
   * Drivers send the same Parse again and again (an unnamed statement run in a loop): equal bytes
   * decode to the same message, whose text is then the same string the decision cache was keyed by.
   */
  decodeParse(frame: MessageFrame): FrontendMessage {
    const last = this.lastParse;
    if (last?.raw.equals(frame.raw)) return last;
    const message = decodeFrontendMessage(frame);
    // A copy of its bytes: the frame is a view into the client's chunk, which should not be kept alive for it.
    this.lastParse = frame.raw.length <= PARSE_MEMO_BYTES ? { ...message, raw: Buffer.from(frame.raw) } : undefined;
    return message;
  }

  /** The statement a Bind or Describe names, when the client prepared it in this session. */
  prepared(name: string): Allowed | undefined {
    return name === '' ? this.unnamed : this.named.get(name);
  }

  /** Records a named statement under the server-side name its text and parameter types give it. */
  prepareNamed(name: string, sql: string, decision: Allowed['decision'], paramTypes: readonly number[], parse: Buffer): Prepared {
    const serverName = serverStatementName(decision.sql, paramTypes);
    const prepared = { sql, decision, serverName, parse: renameParse(parse, serverName) };
    this.named.set(name, prepared);
    return prepared;
  }

  /** A prepared statement decided again to the same text: it runs under the new decision from now on. */
  redecided(name: string, prepared: Allowed, decision: Allowed['decision']): Allowed {
    const current = { ...prepared, decision };
    if (name === '') this.unnamed = { ...this.unnamed!, decision };
    else this.named.set(name, { ...(prepared as Prepared), decision });
    return current;
  }
}
