/**
 * The analyzer's "changes the session" fact (StatementAnalysis.sessionChanges), which pins the
 * upstream connection to the client's session until it is reset (docs/policy.md, session state).
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { analyzeStatement } from '../../proxy/policy/analyze.js';
import { loadParser, parseStatements } from '../../proxy/policy/parser.js';
import { SETTABLE } from '../../proxy/policy/settings.js';

beforeAll(loadParser);

function changes(sql: string): readonly string[] {
  const parsed = parseStatements(sql);
  if (!parsed.ok || parsed.statements.length !== 1) throw new Error(`expected one statement: ${sql}`);
  return analyzeStatement(parsed.statements[0]!).sessionChanges;
}

describe('session changes', () => {
  it('SET and RESET of a settable parameter change the session; SET LOCAL and SET TRANSACTION do not', () => {
    expect(changes('SET statement_timeout = 1')).toEqual(['SET statement_timeout']);
    expect(changes('SET SESSION TIME ZONE UTC')).toEqual(['SET timezone']);
    expect(changes('/* lead */ set datestyle to german')).toEqual(['SET datestyle']);
    expect(changes('RESET application_name')).toEqual(['RESET application_name']);
    expect(changes('SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE')).toEqual(['SET SESSION CHARACTERISTICS']);
    expect(changes('SET LOCAL statement_timeout = 1')).toEqual([]);
    expect(changes('SET TRANSACTION ISOLATION LEVEL SERIALIZABLE')).toEqual([]);
  });

  it('set_config changes the session unless is_local is the constant true', () => {
    expect(changes("SELECT set_config('statement_timeout', '1', false)")).toEqual(["set_config('statement_timeout', ...)"]);
    expect(changes("SELECT pg_catalog.set_config('TimeZone', 'UTC', 'off')")).toEqual(["set_config('timezone', ...)"]);
    expect(changes("SELECT set_config('datestyle', 'German', $1)")).toEqual(["set_config('datestyle', ...)"]);
    expect(changes("SELECT set_config('datestyle', 'German', random() > 0.5)")).toEqual(["set_config('datestyle', ...)"]);
    expect(changes("SELECT 1 FROM (SELECT set_config('application_name', 'x', false)) s")).toEqual(["set_config('application_name', ...)"]);
    expect(changes("SELECT set_config('statement_timeout', '1', true)")).toEqual([]);
    expect(changes("SELECT set_config('statement_timeout', '1', 'on'::boolean)")).toEqual([]);
    expect(changes('SELECT 1')).toEqual([]);
  });

  it('any set_config of a settable parameter whose is_local is not a true constant is a session change', () => {
    const local = fc.constantFrom('false', "'f'", "'off'", "'no'", '0::boolean', '$1', 'now() > now()', "(select false)", 'null');
    fc.assert(
      fc.property(fc.constantFrom(...SETTABLE), local, (name, isLocal) => {
        expect(changes(`SELECT set_config('${name}', 'x', ${isLocal})`)).toHaveLength(1);
      }),
    );
  });
});
