/** A searchable document: fields of text, each counted `weight` times. */
export interface SearchDocument {
  id: string;
  fields: { text: string; weight: number }[];
}

export interface SearchHit {
  id: string;
  score: number;
}

const STOP_WORDS = new Set(
  'a an and are as at be by can do does for from how i in is it its me my of on or our please show some that the their them this to up v1 want we what which with you your'.split(' '),
);

/** Words an agent may use for the same thing; each group is searched as one concept, at reduced weight for the other words. */
const SYNONYM_GROUPS: readonly string[][] = [
  ['credential', 'password', 'secret', 'key', 'token', 'login'],
  ['rotate', 'rotation', 'renew', 'regenerate', 'reissue', 'reset', 'refresh', 'new'],
  ['create', 'register', 'registration', 'add', 'new', 'make', 'provision'],
  ['delete', 'remove', 'revoke', 'revocation', 'destroy', 'drop'],
  ['update', 'change', 'modify', 'edit', 'patch', 'set'],
  ['list', 'all', 'enumerate'],
  ['get', 'read', 'fetch', 'describe', 'detail', 'inspect'],
  ['disable', 'kill', 'switch', 'suspend', 'pause', 'enable', 'block'],
  ['agent', 'bot', 'assistant'],
  ['database', 'db', 'postgres', 'upstream'],
  ['policy', 'profile', 'rule', 'permission'],
  ['organization', 'org', 'account'],
  ['test', 'check', 'ping', 'verify', 'connect'],
];

const SYNONYM_WEIGHT = 0.5;

/** Light stemming: plurals and common verb endings, so rotate/rotated/rotating and agent/agents meet. */
export function stem(word: string): string {
  let w = word;
  if (w.length > 4 && w.endsWith('ies')) w = `${w.slice(0, -3)}y`;
  else if (w.length > 4 && /(?:ss|x|ch|sh)es$/.test(w)) w = w.slice(0, -2);
  else if (w.length > 3 && w.endsWith('s') && !w.endsWith('ss')) w = w.slice(0, -1);
  if (w.length > 5 && w.endsWith('ing')) w = w.slice(0, -3);
  else if (w.length > 4 && w.endsWith('ed')) w = w.slice(0, -2);
  if (w.length > 3 && w.endsWith('e')) w = w.slice(0, -1);
  return w;
}

/** Lower-case stemmed words of `text`, camelCase and snake_case split, possessives and stop words dropped. */
export function tokenize(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .replace(/['’]s\b/g, '')
    .split(/[^a-z0-9]+/)
    .filter((word) => word.length > 0 && !STOP_WORDS.has(word))
    .map(stem);
}

const synonymsOf = new Map<string, Set<string>>();
for (const group of SYNONYM_GROUPS) {
  const stems = group.map(stem);
  for (const word of stems) {
    const known = synonymsOf.get(word) ?? new Set<string>();
    stems.filter((other) => other !== word).forEach((other) => known.add(other));
    synonymsOf.set(word, known);
  }
}

const K1 = 1.2;
const B = 0.75;

/** Okapi BM25 over weighted fields, with synonym expansion of the query. */
export class SearchIndex {
  private readonly terms: { id: string; counts: Map<string, number>; length: number }[];
  private readonly documentFrequency = new Map<string, number>();
  private readonly averageLength: number;

  constructor(documents: readonly SearchDocument[]) {
    this.terms = documents.map((document) => {
      const counts = new Map<string, number>();
      let length = 0;
      for (const field of document.fields) {
        for (const token of tokenize(field.text)) {
          counts.set(token, (counts.get(token) ?? 0) + field.weight);
          length += field.weight;
        }
      }
      for (const token of counts.keys()) this.documentFrequency.set(token, (this.documentFrequency.get(token) ?? 0) + 1);
      return { id: document.id, counts, length };
    });
    this.averageLength = this.terms.reduce((sum, t) => sum + t.length, 0) / Math.max(1, this.terms.length);
  }

  private termScore(term: string, counts: Map<string, number>, length: number): number {
    const frequency = counts.get(term) ?? 0;
    if (frequency === 0) return 0;
    const n = this.documentFrequency.get(term) ?? 0;
    const idf = Math.log(1 + (this.terms.length - n + 0.5) / (n + 0.5));
    return (idf * frequency * (K1 + 1)) / (frequency + K1 * (1 - B + (B * length) / this.averageLength));
  }

  /** Best first; documents matching nothing are left out; ties keep document order. */
  search(query: string, limit: number): SearchHit[] {
    const terms = [...new Set(tokenize(query))];
    return this.terms
      .map(({ id, counts, length }) => {
        let score = 0;
        for (const term of terms) {
          const synonym = Math.max(0, ...[...(synonymsOf.get(term) ?? [])].map((other) => this.termScore(other, counts, length)));
          score += Math.max(this.termScore(term, counts, length), SYNONYM_WEIGHT * synonym);
        }
        return { id, score };
      })
      .filter((hit) => hit.score > 0)
      .sort((a, b) => b.score - a.score)
      .slice(0, limit);
  }
}
