import { analyzeSql, type AnalysisSession, type SqlAnalysis } from './analyze.js';
import { DEFAULT_SEARCH_PATH } from './names.js';

/**
 * Analyses of whole query strings, keyed by the exact text, the search path and the upstream catalog's version (analysis needs no
 * policy, so a policy change does not invalidate it). Deliberately not keyed by libpg_query's
 * fingerprint: it ignores literals and alias names, and both change decisions (honeytoken values,
 * set_config names, `FROM customers c, orders o` against `FROM customers o, orders c`).
 * Least recently used entries are evicted beyond `capacity` entries or `textCapacity` characters
 * of text: an analysis holds its parse tree, about 60 bytes of memory per character of a large
 * statement, so distinct large statements would otherwise pile up gigabytes.
 */
export class AnalysisCache {
  private readonly entries = new Map<string, SqlAnalysis>();
  private text = 0;

  constructor(
    private readonly capacity = 10_000,
    private readonly textCapacity = 2 * 1024 * 1024,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  analyze(sql: string, session: AnalysisSession = {}): SqlAnalysis {
    // A JSON array is never a prefix of another one, so the concatenation keeps keys distinct.
    const key = `${session.catalog?.version ?? ''}\u0000${JSON.stringify(session.searchPath ?? DEFAULT_SEARCH_PATH)}${sql}`;
    const hit = this.entries.get(key);
    if (hit) {
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit;
    }
    const result = analyzeSql(sql, session);
    this.entries.set(key, result);
    this.text += key.length;
    while (this.entries.size > this.capacity || this.text > this.textCapacity) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
      this.text -= oldest.length;
    }
    return result;
  }
}
