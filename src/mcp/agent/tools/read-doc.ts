import { z } from 'zod';
import { textPage } from '../../docs.js';
import { structuredResult, toolError } from '../../tool.js';
import type { AgentTool } from '../context.js';

/** Characters (UTF-16 code units) one read_doc call returns at most: a page an agent's context takes in comfortably. */
export const PAGE_CHARS = 8_000;
const MIN_PAGE_CHARS = 200;

export const ReadDocInput = z.strictObject({
  doc_id: z.string().min(1).max(200).describe('A doc_id from search_docs: a document ("refusals") or one of its sections ("refusals#allowed-tables")'),
  offset: z.int().min(0).default(0).describe('Where to start, in characters: 0 for the first page, then the next_offset of the page before'),
  max_chars: z.int().min(MIN_PAGE_CHARS).max(PAGE_CHARS).default(PAGE_CHARS).describe(`Most characters to return (default and most ${PAGE_CHARS})`),
});

export const readDoc: AgentTool<typeof ReadDocInput> = {
  name: 'read_doc',
  title: 'Read a pgward doc',
  description:
    `The Markdown text of one document for agents, or of one of its sections, a page at a time: at most max_chars characters (UTF-16 code units, default and most ${PAGE_CHARS}) from offset, ending at a line break where one is near. ` +
    'next_offset is where the next page starts (call again with offset set to it); null means this page ends the text.',
  inputSchema: ReadDocInput,
  outputSchema: z.object({
    doc_id: z.string(),
    title: z.string(),
    text: z.string(),
    offset: z.int().describe('Where this page starts'),
    next_offset: z.int().nullable().describe('The offset of the next page; null on the last page'),
    total_chars: z.int().describe('The length of the whole document or section'),
  }),
  annotations: { title: 'Read a pgward doc', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async handler({ doc_id, offset, max_chars }, { services }) {
    const found = services.docs.find(doc_id);
    if (!found) return toolError(`Unknown doc_id "${doc_id}". Documents: ${services.docs.docs.map((doc) => doc.id).join(', ')}; search_docs finds sections.`);
    if (offset > 0 && offset >= found.text.length) return toolError(`offset ${offset} is past the end of "${doc_id}", which has ${found.text.length} characters; start again at 0.`);
    return structuredResult({ doc_id, title: 'title' in found ? found.title : found.heading, ...textPage(found.text, offset, max_chars) });
  },
};
