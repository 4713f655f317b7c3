import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { SearchIndex } from './search.js';

/** pgward's own documentation, shipped in the package next to `src/`. */
export const DOCS_DIR = fileURLToPath(new URL('../../docs/', import.meta.url));

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

/** Reads every `*.md` of `dir`, in name order; `forAgents` leaves out what agents must not read (see withoutTraps). */
export async function loadDocs(dir = DOCS_DIR, options: { forAgents?: boolean } = {}): Promise<DocsLibrary> {
  const names = (await readdir(dir)).filter((name) => name.endsWith('.md')).sort();
  const docs = await Promise.all(names.map(async (name) => parseDoc(name.slice(0, -3), await readFile(`${dir}${name}`, 'utf8'))));
  return docsLibrary(options.forAgents ? docs.map(withoutTraps) : docs);
}
