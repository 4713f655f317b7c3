import { z } from 'zod';
import { structuredResult, toolError } from '../../tool.js';
import type { AgentTool } from '../context.js';

export const ReadDocInput = z.strictObject({
  doc_id: z.string().min(1).max(200).describe('A doc_id from search_docs: a document ("policy") or one of its sections ("policy#masking")'),
});

export const readDoc: AgentTool<typeof ReadDocInput> = {
  name: 'read_doc',
  title: 'Read a pgward doc',
  description: 'The Markdown text of one pgward document, or of one of its sections.',
  inputSchema: ReadDocInput,
  outputSchema: z.object({ doc_id: z.string(), title: z.string(), text: z.string() }),
  annotations: { title: 'Read a pgward doc', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async handler({ doc_id }, { services }) {
    const found = services.docs.find(doc_id);
    if (!found) return toolError(`Unknown doc_id "${doc_id}". Documents: ${services.docs.docs.map((doc) => doc.id).join(', ')}; search_docs finds sections.`);
    return structuredResult({ doc_id, title: 'title' in found ? found.title : found.heading, text: found.text });
  },
};
