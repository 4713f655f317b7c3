import { z } from 'zod';
import { textPage } from '../../docs.js';
import { structuredResult } from '../../tool.js';
import type { AgentTool } from '../context.js';

export const SearchDocsInput = z.strictObject({
  query: z.string().min(1).max(500).describe('What you want to know, in words: "how does masking work", "what does rule allowed_tables.not_allowed ask of me"'),
  limit: z.int().min(1).max(20).default(5).describe('Most sections to return, best first'),
});

const SNIPPET_CHARS = 300;

export const searchDocs: AgentTool<typeof SearchDocsInput> = {
  name: 'search_docs',
  title: 'Search the pgward docs',
  description: 'Finds sections of the documentation for agents (how to query here, what each policy setting means for you, what each refusal asks of you, the tools) by relevance (BM25 over headings and text). Read a hit with read_doc and its doc_id.',
  inputSchema: SearchDocsInput,
  outputSchema: z.object({
    results: z.array(z.object({ doc_id: z.string().describe('For read_doc: a document, or document#section'), title: z.string(), heading: z.string(), snippet: z.string() })),
  }),
  annotations: { title: 'Search the pgward docs', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async handler({ query, limit }, { services }) {
    const results = services.docs.search(query, limit).map(({ section, title }) => ({
      doc_id: section.id,
      title,
      heading: section.heading,
      snippet: textPage(section.text.replace(/\s+/g, ' '), 0, SNIPPET_CHARS).text,
    }));
    return structuredResult({ results });
  },
};
