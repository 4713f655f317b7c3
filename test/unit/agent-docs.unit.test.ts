import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadAgentDocs, parseDoc, textPage, withoutTraps, type DocsLibrary } from '../../src/mcp/docs.js';
import { STATEMENT_TIMEOUT_RULE } from '../../proxy/statement-deadline.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

const doc = parseDoc(
  'policy',
  `# Statement policy

Lead paragraph.

1. **Honeytokens** trip first,
   on any reference.
2. **Read-only** refuses writes.

| Rule | Meaning |
|---|---|
| \`honeytoken.table\` | a canary table |
| \`read_only.write\` | a write |

A paragraph about canaries goes whole,
even its second line.

## Budgets

Budgets stay.

## Honeytokens

Everything here goes.

### Details

Even this.

## Masking

\`\`\`sql
-- a canary in code goes with its paragraph

select 1
\`\`\`
`,
);

describe('the docs as agents read them', () => {
  const agentDoc = withoutTraps(doc);

  it('drop the list items, table rows, paragraphs and sections that mention honeytokens, and nothing else', () => {
    expect(agentDoc.text).toBe(`# Statement policy

Lead paragraph.

2. **Read-only** refuses writes.

| Rule | Meaning |
|---|---|
| \`read_only.write\` | a write |

## Budgets

Budgets stay.

## Masking

\`\`\`sql

select 1
\`\`\`
`);
    expect(agentDoc.sections.map((section) => section.id)).toEqual(['policy', 'policy#budgets', 'policy#masking']);
  });

  it('leave a document that mentions none unchanged', () => {
    const plain = parseDoc('x', '# X\n\nNothing to hide.\n');
    expect(withoutTraps(plain)).toEqual(plain);
  });
});

describe('a page of a document', () => {
  const pages = (text: string, size: number): string[] => {
    const out: string[] = [];
    for (let offset: number | null = 0; offset !== null; ) {
      const page = textPage(text, offset, size);
      expect(page.offset).toBe(offset);
      expect(page.total_chars).toBe(text.length);
      expect(page.text.length).toBeLessThanOrEqual(size);
      out.push(page.text);
      offset = page.next_offset;
    }
    return out;
  };
  const splitsPair = (page: string): boolean => /^[\uDC00-\uDFFF]|[\uD800-\uDBFF]$/.test(page);

  it('holds at most the size asked for, and the pages make up the text', () => {
    const text = 'abcdefghij'.repeat(25);
    expect(pages(text, 100)).toEqual([text.slice(0, 100), text.slice(100, 200), text.slice(200)]);
    expect(textPage(text, 200, 100)).toEqual({ text: text.slice(200), offset: 200, next_offset: null, total_chars: 250 });
    expect(textPage('', 0, 100)).toEqual({ text: '', offset: 0, next_offset: null, total_chars: 0 });
  });

  it('never cuts a surrogate pair, at either end', () => {
    const text = `a${'😀'.repeat(300)}`;
    const cut = pages(text, 100);
    expect(cut.join('')).toBe(text);
    expect(cut.filter(splitsPair)).toEqual([]);
    expect(cut[0]).toHaveLength(99);
    // An offset between the halves of a pair starts the page at the pair.
    expect(textPage(text, 2, 100)).toMatchObject({ offset: 1, text: '😀'.repeat(50) });
  });

  it('ends after a line break when one falls in the second half of the page', () => {
    const text = `${'x'.repeat(70)}\n${'y'.repeat(70)}\n${'z'.repeat(70)}`;
    expect(pages(text, 100)).toEqual([`${'x'.repeat(70)}\n`, `${'y'.repeat(70)}\n`, 'z'.repeat(70)]);
    const early = `${'x'.repeat(10)}\n${'y'.repeat(150)}`;
    expect(textPage(early, 0, 100).next_offset).toBe(100);
  });
});

/** Words of the operator docs that name the gateway's internals: modules, classes, functions, parser nodes. */
async function internalTerms(): Promise<string[]> {
  const policy = await readFile(`${ROOT}docs/policy.md`, 'utf8');
  const identifiers = [...policy.matchAll(/\b(?:[A-Z][a-z]+[A-Z][A-Za-z]*|[a-z]+[A-Z][A-Za-z]*)\b/g)].map((m) => m[0]);
  const modules = [...policy.matchAll(/[\w/.-]+\.ts\b/g)].map((m) => m[0]);
  const notInternal = new Set(['PostgreSQL', 'MiB', 'GiB']);
  return [...new Set([...identifiers, ...modules])].filter((term) => !notInternal.has(term));
}

/** Pages an agent must never be served: limits, ways around masking, how traps are set, how the gateway is tested. */
const FORBIDDEN = [/known limit/i, /bypass/i, /fingerprint/i, /libpg_query/i, /deparse/i, /MAX_TREE_|MAX_BINDING_/, /parse tree/i, /coverage sweep/i, /tested by/i, /honeytoken|canar(?:y|ies)|\btraps?\b/i, /\b(?:proxy|src|test)\//, /\b[\w-]+\.ts\b/];

/** Every rule the gateway can answer an agent with: as the code writes them, and as it builds them from parts. */
async function emittedRules(): Promise<string[]> {
  const families = 'parse|catalog|policy|credential|read_only|statement|statement_kind|function|table|allowed_tables|masked_columns|migration_safety|row_filters|max_rows|budget|write_cap|write_mode';
  const quoted = new RegExp(`'((?:${families})\\.[a-z_]+(?:\\.[a-z_]+)?)'`, 'g');
  const inReason = new RegExp(`\\(rule ((?:${families})\\.[a-z_.]+)\\)`, 'g');
  const found = new Set<string>();
  for (const dir of ['proxy', 'src/mcp/agent']) {
    for (const name of await readdir(`${ROOT}${dir}`, { recursive: true })) {
      if (!name.endsWith('.ts')) continue;
      const text = await readFile(`${ROOT}${dir}/${name}`, 'utf8');
      for (const match of [...text.matchAll(quoted), ...text.matchAll(inReason)]) found.add(match[1]!);
    }
  }
  const analysis = await readFile(`${ROOT}proxy/policy/analysis.ts`, 'utf8');
  const effects = [.../type EffectFamily = ([^;]+);/.exec(analysis)![1]!.matchAll(/'(\w+)'/g)].map((m) => m[1]!);
  expect(effects).toContain('write');
  const built = [
    // rules.ts effectCheck: `read_only.<family>` under a read-only policy, `statement.<family>` for the effects refused under any.
    ...effects.map((family) => `read_only.${family}`),
    ...['setting', 'transaction', 'procedure', 'notify', 'prepare', 'copy'].map((family) => `statement.${family}`),
    // budgets.ts: each scope's limits.
    ...['budget', 'budget.plan'].flatMap((scope) => ['queries_per_day', 'bytes_per_month', 'unknown'].map((limit) => `${scope}.${limit}`)),
    // run.ts: whose cap cut an MCP result.
    'max_rows.policy',
    'max_rows.request',
    'max_result_bytes',
    STATEMENT_TIMEOUT_RULE,
  ];
  return [...new Set([...found, ...built])].sort();
}

describe('the docs agents are served', () => {
  let served: DocsLibrary;
  beforeAll(async () => {
    served = await loadAgentDocs();
  });
  const everything = (): { id: string; text: string }[] => served.docs.map((doc) => ({ id: doc.id, text: doc.text }));

  it('are the agent documents: how to query, the policy, the refusals, the tools', () => {
    expect(served.docs.map((doc) => doc.id)).toEqual(['policy', 'querying', 'refusals', 'tools']);
    expect(served.search('what does allowed_tables.not_allowed ask of me', 3)[0]?.section.id).toBe('refusals#tables');
  });

  it('mention none of the gateway’s internals, its limits or its traps', async () => {
    const terms = await internalTerms();
    expect(terms).toEqual(expect.arrayContaining(['AnalysisCache', 'decideSql', 'RangeVar', 'mask.ts', 'proxy/policy/analysis.ts']));
    const found = everything().flatMap(({ id, text }) => [
      ...terms.filter((term) => new RegExp(`\\b${term.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\\b`).test(text)).map((term) => `${id}: ${term}`),
      ...FORBIDDEN.filter((pattern) => pattern.test(text)).map((pattern) => `${id}: ${pattern.source}`),
    ]);
    expect(found).toEqual([]);
  });

  it('give every rule the gateway can answer with an entry in the refusals document', async () => {
    const rules = await emittedRules();
    expect(rules).toEqual(expect.arrayContaining(['allowed_tables.not_allowed', 'parse.error', 'read_only.write', 'budget.plan.bytes_per_month', 'max_rows.uncapped', 'policy.changed', 'statement_kind.denied', 'table.denied', 'migration_safety.create_index', 'row_filters.write', 'row_filters.indirect', 'write_cap.exceeded', 'write_cap.unbounded', 'write_mode.sandbox_unavailable', 'write_mode.rolled_back']));
    const refusals = served.find('refusals')!.text;
    expect(rules.filter((rule) => !refusals.includes(`\`${rule}\``) && !refusals.includes(`\`${rule}.`))).toEqual([]);
  });
});
