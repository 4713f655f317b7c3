import { describe, expect, it } from 'vitest';
import { newOperatorToken, OPERATOR_TOKEN, operatorOf, parseOperatorTokens } from '../../src/auth/operators.js';
import { loadConfig, ConfigError } from '../../src/config.js';
import { sha256Hex } from '../../src/crypto/tokens.js';

describe('operator tokens', () => {
  it('makes a pgw_op_ token whose entry names the operator and holds only its SHA-256', () => {
    const { token, entry } = newOperatorToken('alice');
    expect(token).toMatch(OPERATOR_TOKEN);
    expect(entry).toBe(`alice:${sha256Hex(token)}`);
    expect(entry).not.toContain(token.slice('pgw_op_'.length));
  });

  it('names the operator a token belongs to, and nobody for any other token or a near miss', () => {
    const alice = newOperatorToken('alice');
    const bob = newOperatorToken('bob');
    const entries = parseOperatorTokens(`${alice.entry}, ${bob.entry}`);
    expect(operatorOf(alice.token, entries)).toBe('alice');
    expect(operatorOf(bob.token, entries)).toBe('bob');
    expect(operatorOf(newOperatorToken('alice').token, entries)).toBeUndefined();
    expect(operatorOf(`${alice.token.slice(0, -1)}${alice.token.endsWith('A') ? 'B' : 'A'}`, entries)).toBeUndefined();
    expect(operatorOf(alice.token, [])).toBeUndefined();
  });

  it.each([
    ['alice', 'no hash'],
    [`alice:${'A'.repeat(64)}`, 'uppercase hex'],
    [`alice:${'a'.repeat(63)}`, 'short hash'],
    [`Alice:${'a'.repeat(64)}`, 'uppercase name'],
    [`alice:${'a'.repeat(64)}:x`, 'extra part'],
    [`alice:${'a'.repeat(64)},alice:${'b'.repeat(64)}`, 'a name twice'],
  ])('refuses PGWARD_OPERATOR_TOKENS=%s (%s) at start, naming the variable', (spec) => {
    expect(() => parseOperatorTokens(spec)).toThrow();
    expect(() => loadConfig({ PGWARD_OPERATOR_TOKENS: spec })).toThrow(ConfigError);
  });

  it('refuses an operator name outside [a-z0-9_.-]', () => {
    expect(() => newOperatorToken('Al ice')).toThrow(/operator name/);
  });
});
