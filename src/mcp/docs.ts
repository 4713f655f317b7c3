import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { SearchIndex } from './search.js';

/**
 * The documentation agents read (`docs/agents/`): how to query through pgward, what the policy and
 * each refusal ask of them. The operator docs beside it describe the gateway's internals and are
 * never served to agents.
 */
export const AGENT_DOCS_DIR = fileURLToPath(new URL('../../docs/agents/', import.meta.url));

export interface DocSection {
  /** `<doc>#<heading slug>`; the document's lead (before its first `##`) has no fragment. */
  readonly id: string;
  readonly doc: string;
  readonly heading: string;
  readonly text: string;
}

export interface Doc {
  /** The file name without `.md`: `policy`, `mcp`, ... */
  readonly id: string;
  readonly title: string;
  readonly text: string;
  readonly sections: readonly DocSection[];
}

export interface DocHit {
  readonly section: DocSection;
  readonly title: string;
  readonly score: number;
}

/** The documents, each cut at its `##` headings, searchable by section. */
export interface DocsLibrary {
  readonly docs: readonly Doc[];
  find(id: string): Doc | DocSection | undefined;
  search(query: string, limit: number): DocHit[];
}

function slug(heading: string): string {
  return heading.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
}

export function parseDoc(id: string, text: string): Doc {
  const title = /^#\s+(.+)$/m.exec(text)?.[1]?.trim() ?? id;
  const parts = text.split(/^(?=##\s)/m);
  const sections = parts.map((part, index): DocSection => {
    const heading = index === 0 ? title : (/^##\s+(.+)$/m.exec(part)?.[1]?.trim() ?? '');
    return { id: index === 0 ? id : `${id}#${slug(heading)}`, doc: id, heading, text: part.trim() };
  });
  return { id, title, text, sections };
}

export function docsLibrary(docs: readonly Doc[]): DocsLibrary {
  const sections = new Map(docs.flatMap((doc) => doc.sections.map((section): [string, DocSection] => [section.id, section])));
  const byId = new Map(docs.map((doc) => [doc.id, doc]));
  const index = new SearchIndex(
    [...sections.values()].map((section) => ({
      id: section.id,
      fields: [
        { text: section.heading, weight: 3 },
        { text: byId.get(section.doc)!.title, weight: 1 },
        { text: section.text, weight: 1 },
      ],
    })),
  );
  return {
    docs,
    find: (id) => byId.get(id) ?? sections.get(id),
    search: (query, limit) =>
      index.search(query, limit).map((hit) => {
        const section = sections.get(hit.id)!;
        return { section, title: byId.get(section.doc)!.title, score: hit.score };
      }),
  };
}

/** Words that would tell an agent of the traps set for it. */
const TRAP = /honeytoken|canary|canaries|\btrap/i;
const ITEM = /^\s*(?:[-*+]|\d+\.)\s/;

/** A block of Markdown without its table rows and list items that mention a trap; a paragraph that does goes whole. */
function withoutTrapLines(block: string): string {
  if (!TRAP.test(block)) return block;
  const lines = block.split('\n');
  // Table rows go one by one; so do the lines of a code block, whose fences must stay.
  if (lines.every((line) => line.startsWith('|')) || block.includes('```')) return lines.filter((line) => !TRAP.test(line)).join('\n');
  if (!ITEM.test(lines[0] ?? '')) return '';
  const items: string[][] = [];
  for (const line of lines) {
    if (ITEM.test(line) || items.length === 0) items.push([line]);
    else items.at(-1)!.push(line);
  }
  return items.filter((item) => !TRAP.test(item.join('\n'))).map((item) => item.join('\n')).join('\n');
}

/** The text without every section (to the next heading of its level or above) whose heading mentions a trap. */
function withoutTrapHeadings(text: string): string {
  let skipping = 0;
  let fenced = false;
  return text
    .split('\n')
    .filter((line) => {
      if (line.startsWith('```')) fenced = !fenced;
      const level = fenced ? 0 : (/^(#{1,6})\s/.exec(line)?.[1]?.length ?? 0);
      if (level > 0 && skipping > 0 && level <= skipping) skipping = 0;
      if (level > 0 && skipping === 0 && TRAP.test(line)) skipping = level;
      return skipping === 0;
    })
    .join('\n');
}

/**
 * A document as agents may read it: every paragraph, table row and list item that mentions
 * honeytokens dropped, and sections left empty by that dropped too. An agent that could read how
 * canaries are planted and answered could tell them apart; operators read the full text.
 */
export function withoutTraps(doc: Doc): Doc {
  if (!TRAP.test(doc.text)) return doc;
  const text = withoutTrapHeadings(doc.text)
    .split(/\n{2,}/)
    .map(withoutTrapLines)
    .filter((block) => block.trim() !== '')
    .join('\n\n');
  return parseDoc(doc.id, `${text.trimEnd()}\n`);
}

/** Reads every `*.md` of `dir`, in name order, as agents may read it (see withoutTraps). */
export async function loadAgentDocs(dir = AGENT_DOCS_DIR): Promise<DocsLibrary> {
  const names = (await readdir(dir)).filter((name) => name.endsWith('.md')).sort();
  const docs = await Promise.all(names.map(async (name) => parseDoc(name.slice(0, -3), await readFile(`${dir}${name}`, 'utf8'))));
  return docsLibrary(docs.map(withoutTraps));
}

/** `index`, moved back by one when it falls between the two halves of a UTF-16 surrogate pair. */
function codePointBoundary(text: string, index: number): number {
  const before = text.charCodeAt(index - 1);
  const after = text.charCodeAt(index);
  return before >= 0xd800 && before <= 0xdbff && after >= 0xdc00 && after <= 0xdfff ? index - 1 : index;
}

export interface TextPage {
  readonly text: string;
  /** Where the page starts, in UTF-16 code units. */
  readonly offset: number;
  /** Where the next page starts; null on the last page. */
  readonly next_offset: number | null;
  readonly total_chars: number;
}

/**
 * At most `size` (two or more) UTF-16 code units of `text` from `offset`, never starting or ending
 * inside a surrogate pair, and ending after a line break when one falls in the page's second half,
 * so pages split between lines of Markdown where they can.
 */
export function textPage(text: string, offset: number, size: number): TextPage {
  const start = codePointBoundary(text, Math.min(offset, text.length));
  let end = codePointBoundary(text, Math.min(start + size, text.length));
  if (end < text.length) {
    const lineEnd = text.lastIndexOf('\n', end - 1) + 1;
    if (lineEnd > start + size / 2) end = lineEnd;
  }
  return { text: text.slice(start, end), offset: start, next_offset: end < text.length ? end : null, total_chars: text.length };
}
