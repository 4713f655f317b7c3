import { describe, expect, it } from 'vitest';
import { parseDoc, withoutTraps } from '../../src/mcp/docs.js';

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
