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

/** Reads every `*.md` of `dir`, in name order. */
export async function loadDocs(dir = DOCS_DIR): Promise<DocsLibrary> {
  const names = (await readdir(dir)).filter((name) => name.endsWith('.md')).sort();
  return docsLibrary(await Promise.all(names.map(async (name) => parseDoc(name.slice(0, -3), await readFile(`${dir}${name}`, 'utf8')))));
}
