import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type { CredentialRow } from '../../projections/credentials.js';
import type { PolicyRow } from '../../projections/policies.js';
import { decideStatement, type Honeytokens } from '../../proxy/policy/hook.js';
import { statementIdentity } from '../../proxy/policy/identity.js';
import { loadParser, normalize, parseStatements } from '../../proxy/policy/parser.js';
import type { Canary } from '../../proxy/policy/rules.js';
import { numericShape, type NumericShape } from '../../proxy/policy/shape.js';
import { corpus, corpusPolicies } from '../security/corpus.js';

beforeAll(loadParser);

/** A parse tree without what may differ between texts of one shape: locations, statement lengths and numbers' values (their classes stay). */
function stripped(tree: unknown): unknown {
  if (Array.isArray(tree)) return tree.map(stripped);
  if (tree === null || typeof tree !== 'object') return tree;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(tree)) {
    if (key === 'location' || key === 'stmt_location' || key === 'stmt_len') continue;
    if ((key === 'ival' || key === 'fval') && typeof value === 'object') out[key] = 'number';
    else if ((key === 'Integer' || key === 'Float') && typeof value === 'object') out[key] = 'number';
    else out[key] = stripped(value);
  }
  return out;
}

function treeOf(sql: string): unknown {
  const parsed = parseStatements(sql);
  return parsed.ok ? parsed.statements.map((s) => stripped(s.stmt)) : `does not parse`;
}

const integerText = fc.oneof(fc.integer({ min: 0, max: 2_147_483_647 }).map(String), fc.nat(99).map((n) => `00${n}`));
const otherNumberText = fc.oneof(
  fc.tuple(fc.nat(99_999), fc.nat(999)).map(([a, b]) => `${a}.${b}`),
  fc.tuple(fc.nat(999), fc.integer({ min: -40, max: 40 })).map(([a, e]) => `${a}e${e}`),
  fc.bigInt({ min: 2_147_483_648n, max: 10n ** 30n }).map(String),
  fc.nat(999).map((a) => `${a}.`),
);

/** `sql` with each number of its shape replaced by an arbitrary one of the same class, or of any class. */
function variantOf(sql: string, shape: NumericShape, anyClass = false): fc.Arbitrary<string> {
  const numberText = fc.oneof(integerText, otherNumberText);
  return fc.tuple(...shape.numbers.map((n) => (anyClass ? numberText : n.integer ? integerText : otherNumberText))).map((texts) => {
    let out = '';
    let copied = 0;
    shape.numbers.forEach((n, i) => {
      out += sql.slice(copied, n.start) + texts[i]!;
      copied = n.end;
    });
    return out + sql.slice(copied);
  });
}

const shaped = corpus.flatMap((entry) => {
  const shape = numericShape(entry.sql);
  return shape ? [{ entry, shape }] : [];
});

describe('numeric shape', () => {
  it('replaces each number by its class and keeps everything else', () => {
    const shape = numericShape('SELECT abalance FROM pgbench_accounts WHERE aid = 48213;');
    expect(shape).toEqual({ key: 'SELECT abalance FROM pgbench_accounts WHERE aid = \u0001;', numbers: [{ start: 50, end: 55, integer: true }] });
    expect(numericShape("select t1.a1, 'x 7', \"c 9\" from t1 where x = $1 -- 42\nlimit 2147483647 offset 2147483648")?.key).toBe(
      "select t1.a1, 'x 7', \"c 9\" from t1 where x = $1 -- 42\nlimit \u0001 offset \u0002",
    );
    expect(numericShape('select 007, 1.5, 1e3, 2., -4')?.key).toBe('select \u0001, \u0002, \u0002, \u0002, -\u0001');
  });

  it('gives no shape to a text without numbers', () => {
    expect(numericShape("select a1 from t2 where b = 'c3'")).toBeUndefined();
  });

  it.each([
    ["select E'\\n' || 1"],
    ["select x'1f', 1"],
    ["select b'101', 1"],
    ["select n'x', 1"],
    ["select U&'\\0041', 1"],
    ['select $$1$$, 1'],
    ['select $a$x$a$, 1'],
    ['select /* 1 */ 1'],
    ["select 'a\\b', 1"],
    ['select 0x1F'],
    ['select 0o17'],
    ['select 1_000'],
    ['select 1e'],
    ['select 1e+'],
    ['select 12abc'],
    ['select 1..5'],
    ['select .5'],
    ['select t.1'],
    ["select 1'x'"],
    ['select "é", 1'],
    ['select 1\u0000'],
    ['select 1\f'],
    ["select 'unterminated, 1"],
    ['select \\1'],
  ])('gives up on what it does not lex as PostgreSQL does: %s', (sql) => {
    expect(numericShape(sql)).toBeUndefined();
  });

  it('texts of one shape parse to the same tree but for numbers and locations (corpus, property)', () => {
    expect(shaped.length).toBeGreaterThan(60);
    let sameShape = 0;
    let otherShape = 0;
    for (const { entry, shape } of shaped) {
      const tree = treeOf(entry.sql);
      fc.assert(
        fc.property(fc.oneof(variantOf(entry.sql, shape), variantOf(entry.sql, shape, true)), (variant) => {
          if (numericShape(variant)?.key !== shape.key) {
            otherShape++;
            return;
          }
          sameShape++;
          expect(treeOf(variant)).toEqual(tree);
        }),
        { numRuns: 20 },
      );
    }
    expect(sameShape).toBeGreaterThan(otherShape);
    expect(otherShape).toBeGreaterThan(0);
  });

  it('texts of one shape parse to the same tree but for numbers and locations (generated texts, property)', () => {
    const sep = fc.constantFrom('', ' ', '\n', '  ', ' --c1\n');
    const spaced = (...parts: fc.Arbitrary<string>[]) => fc.tuple(...parts.flatMap((part) => [part, sep])).map((texts) => texts.join(''));
    const word = (text: string) => fc.constant(text);
    const { expr } = fc.letrec<{ expr: string; atom: string }>((tie) => ({
      atom: fc.oneof(integerText, otherNumberText, fc.constantFrom('a', 't1.a1', '"x1"', '$1', "'a1'", "'it''s 2'", 'true', 'null')),
      expr: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        tie('atom'),
        spaced(tie('expr'), fc.constantFrom('=', '<', '>=', '<>', '+', '-', '*', '/', '%', '^', '||', 'and', 'or'), tie('expr')),
        spaced(word('('), tie('expr'), word(')')),
        spaced(word('-'), tie('expr')),
        spaced(fc.constantFrom('abs', 'round', 'coalesce', 'pg_catalog.lower'), word('('), tie('expr'), word(')')),
        spaced(tie('expr'), fc.constantFrom('::int', '::numeric(10, 2)', '::varchar(3)', '::text[]')),
        spaced(word('case when'), tie('expr'), word('then'), tie('expr'), word('else'), tie('expr'), word('end')),
        spaced(tie('expr'), word('between'), tie('expr'), word('and'), tie('expr')),
        spaced(tie('expr'), word('in ('), tie('expr'), word(','), tie('expr'), word(')')),
        spaced(word('array['), tie('expr'), word(','), tie('expr'), word(']')),
        spaced(word('interval'), fc.constantFrom("'1 day'", "'2 hours'")),
      ),
    }));
    const text = fc.oneof(
      spaced(word('select'), expr, word(','), expr, word('from t1 where'), expr, fc.constantFrom('', 'order by 1', 'order by 2 desc', 'group by 1'), fc.constantFrom('', 'limit'), fc.option(integerText, { nil: '' }), fc.constantFrom('', 'offset 5', 'fetch first 3 rows only')),
      spaced(word('insert into t1 values ('), expr, word(','), expr, word(')')),
      spaced(word('update t1 set a ='), expr, word('where'), expr),
      spaced(word('values ('), expr, word(')'), fc.constantFrom('', ';', '; select 1')),
    );
    let parsed = 0;
    fc.assert(
      fc.property(
        text.chain((sql) => {
          const shape = numericShape(sql);
          return shape ? fc.oneof(variantOf(sql, shape), variantOf(sql, shape, true)).map((variant) => ({ sql, shape, variant })) : fc.constant(undefined);
        }),
        (sample) => {
          if (!sample || numericShape(sample.variant)?.key !== sample.shape.key) return;
          const tree = treeOf(sample.sql);
          if (tree !== 'does not parse') parsed++;
          expect(treeOf(sample.variant)).toEqual(tree);
        },
      ),
      { numRuns: 3_000 },
    );
    expect(parsed).toBeGreaterThan(100);
  });
});

const credential = { credential_id: 'agt_aaaaaaaaaaaaaaaaaaaaaaaaaa', project_id: 'prj_aaaaaaaaaaaaaaaaaaaaaaaaaa' } as CredentialRow;

function policyRow(name: keyof typeof corpusPolicies): PolicyRow {
  const rules = corpusPolicies[name];
  return {
    policy_id: `pol_${name.replace(/_/g, '')}aaaaaaaaaaaaaaaaaa`, project_id: credential.project_id, name, read_only: rules.read_only, allowed_tables: [...rules.allowed_tables],
    masked_columns: { ...rules.masked_columns }, max_rows: null, queries_per_day: 0, bytes_per_month: '0', approval: { held_kinds: [], row_threshold: null, expiry_seconds: 3600 }, honeytokens: [],
    audit_mode: 'best_effort', allow_catalog: rules.allow_catalog, statement_timeout_ms: 30_000,
    statement_allow: null, statement_deny: [], denied_tables: [], migration_safety: 'warn', max_affected_rows: null, write_mode: 'commit', row_filters: {}, version: 1, status: 'active', revision: 1, created_at: '2026-01-01T00:00:00Z', updated_at: '2026-01-01T00:00:00Z',
  };
}

/** Canaries as the corpus plants them; the value canary can be left out, since it turns the shape cache off. */
function honeytokens(name: keyof typeof corpusPolicies, withValues: boolean): Honeytokens {
  const canaries: Canary[] = corpusPolicies[name].canaries.filter((c) => withValues || c.kind !== 'value').map((c) => ({ ...c }));
  return { canariesOf: () => canaries, tripped: () => undefined };
}

describe('decisions and audit identities by numeric shape', () => {
  it('are what deciding and normalizing each text afresh gives (corpus under its policies, property)', () => {
    for (const withValues of [false, true]) {
      for (const { entry, shape } of shaped) {
        if (entry.searchPath) continue;
        const shared = policyRow(entry.policy);
        const context = (policy: PolicyRow) => ({ credential, policy, protocol: 'simple' as const, honeytokens: honeytokens(entry.policy, withValues) });
        decideStatement(entry.sql, context(shared));
        statementIdentity(entry.sql);
        fc.assert(
          fc.property(variantOf(entry.sql, shape), (variant) => {
            // A new policy row object starts with empty decision caches: the decision made from scratch.
            expect(decideStatement(variant, context(shared))).toEqual(decideStatement(variant, context({ ...shared })));
            const normalized = normalize(variant);
            expect(statementIdentity(variant)).toEqual(
              normalized === null ? { normalized_sql: '', query_hash: '' } : { normalized_sql: normalized, query_hash: createHash('sha256').update(normalized).digest('hex').slice(0, 16) },
            );
          }),
          { numRuns: 8 },
        );
      }
    }
  });

  it('are never shared across numbers while a value honeytoken is planted', () => {
    const canaries: Canary[] = [{ honeytoken_id: 'hnt_numbervalue000000000000000', kind: 'value', target: '4242' }];
    const tripped: string[] = [];
    const context = { credential, policy: policyRow('readonly_orders'), protocol: 'simple' as const, honeytokens: { canariesOf: () => canaries, tripped: (_c: CredentialRow, id: string) => void tripped.push(id) } };
    expect(decideStatement('SELECT id FROM orders WHERE id = 1', context)).toMatchObject({ action: 'allow' });
    expect(decideStatement('SELECT id FROM orders WHERE id = 4242', context)).toMatchObject({ action: 'refuse', event: 'blocked', rule: 'allowed_tables.not_allowed', trip: { rule: 'honeytoken.value' } });
    expect(tripped).toEqual(['hnt_numbervalue000000000000000']);
  });

  it('serve the simple protocol’s pgbench query across its literals', () => {
    const policy = policyRow('readwrite_orders');
    const context = { credential, policy: { ...policy, allowed_tables: ['public.*'] }, protocol: 'simple' as const, honeytokens: honeytokens('readwrite_orders', false) };
    const first = decideStatement('SELECT abalance FROM pgbench_accounts WHERE aid = 1;', context);
    const second = decideStatement('SELECT abalance FROM pgbench_accounts WHERE aid = 99999;', context);
    expect(first).toMatchObject({ action: 'allow', event: 'query', tablesRead: ['public.pgbench_accounts'] });
    expect(second).toEqual({ ...first, sql: 'SELECT abalance FROM pgbench_accounts WHERE aid = 99999;' });
  });
});
