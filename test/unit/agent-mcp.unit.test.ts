import { describe, expect, it } from 'vitest';
import { docsLibrary, loadAgentDocs, parseDoc } from '../../src/mcp/docs.js';
import { decodeValue } from '../../src/mcp/agent/values.js';

describe('decodeValue', () => {
  it('gives booleans, exact integers, finite floats and JSON natively, and keeps everything else as PostgreSQL wrote it', () => {
    expect(decodeValue('t', 16)).toBe(true);
    expect(decodeValue('f', 16)).toBe(false);
    expect(decodeValue('42', 23)).toBe(42);
    expect(decodeValue('-7', 21)).toBe(-7);
    expect(decodeValue('1.5', 701)).toBe(1.5);
    expect(decodeValue('NaN', 701)).toBe('NaN');
    expect(decodeValue('Infinity', 700)).toBe('Infinity');
    expect(decodeValue('9007199254740993', 20)).toBe('9007199254740993');
    expect(decodeValue('0.1000000000000000000001', 1700)).toBe('0.1000000000000000000001');
    expect(decodeValue('{"a": [1, null]}', 3802)).toEqual({ a: [1, null] });
    expect(decodeValue('2024-01-02 03:04:05.123456+00', 1184)).toBe('2024-01-02 03:04:05.123456+00');
    expect(decodeValue(null, 23)).toBeNull();
  });
});

describe('docs library', () => {
  const library = docsLibrary([
    parseDoc('policy', '# Statement policy\n\nLead text.\n\n## Masking\n\nColumns are redacted or hashed.\n\n## Honeytokens\n\nCanaries trip.\n'),
    parseDoc('proxy', '# The proxy\n\nPooling and SCRAM.\n'),
  ]);

  it('cuts documents at their ## headings, with ids a section can be read by', () => {
    expect(library.docs[0]!.sections.map((s) => [s.id, s.heading])).toEqual([
      ['policy', 'Statement policy'],
      ['policy#masking', 'Masking'],
      ['policy#honeytokens', 'Honeytokens'],
    ]);
    expect(library.find('policy#masking')?.text).toBe('## Masking\n\nColumns are redacted or hashed.');
    expect(library.find('proxy')).toMatchObject({ title: 'The proxy' });
    expect(library.find('nope')).toBeUndefined();
  });

  it('ranks sections by BM25, headings first', () => {
    expect(library.search('masking columns', 2).map((hit) => hit.section.id)[0]).toBe('policy#masking');
    expect(library.search('scram pooling', 5).map((hit) => hit.section.id)).toEqual(['proxy']);
  });

  it('loads the shipped docs/agents/*.md', async () => {
    const shipped = await loadAgentDocs();
    expect(shipped.docs.map((doc) => doc.id)).toEqual(expect.arrayContaining(['querying', 'refusals', 'tools']));
    expect(shipped.search('the MCP tools', 3).map((hit) => hit.section.doc)).toContain('tools');
  });
});
