import { describe, expect, it } from 'vitest';
import { buildCatalog } from '../../src/mcp/management/catalog.js';
import { SearchIndex, stem, tokenize } from '../../src/mcp/search.js';

describe('tokenize', () => {
  it('splits camelCase, paths and punctuation, drops stop words and possessives, and stems', () => {
    expect(tokenize('rotateAgentCredential')).toEqual(['rotat', 'agent', 'credential']);
    expect(tokenize("Rotate an agent's password")).toEqual(['rotat', 'agent', 'password']);
    expect(tokenize('/v1/projects/{project_id}/agents')).toEqual(['project', 'project', 'id', 'agent']);
    expect(tokenize('listAPIKeys')).toEqual(['list', 'api', 'key']);
  });

  it('stems plurals and verb endings to one form', () => {
    expect(new Set(['agent', 'agents'].map(stem))).toEqual(new Set(['agent']));
    expect(new Set(['rotate', 'rotated', 'rotating', 'rotates'].map(stem))).toEqual(new Set(['rotat']));
    expect(new Set(['policy', 'policies'].map(stem))).toEqual(new Set(['policy']));
    expect(new Set(['database', 'databases'].map(stem))).toEqual(new Set(['databas']));
    expect(stem('access')).toBe('access');
  });
});

describe('SearchIndex', () => {
  const index = new SearchIndex([
    { id: 'listThings', fields: [{ text: 'listThings', weight: 3 }, { text: 'List things', weight: 2 }] },
    { id: 'rotateAgentCredential', fields: [{ text: 'rotateAgentCredential', weight: 3 }, { text: 'Issue a new password and token', weight: 2 }] },
    { id: 'registerAgentCredential', fields: [{ text: 'registerAgentCredential', weight: 3 }, { text: 'Register an agent credential', weight: 2 }] },
    { id: 'deleteThing', fields: [{ text: 'deleteThing', weight: 3 }] },
  ]);

  it('ranks by BM25, best first, leaving out what matches nothing', () => {
    expect(index.search('rotate agent credential', 10).map((h) => h.id)).toEqual(['rotateAgentCredential', 'registerAgentCredential']);
    expect(index.search('zebra', 10)).toEqual([]);
  });

  it('matches synonyms at reduced weight, below a direct match', () => {
    expect(index.search('renew the secret', 10)[0]?.id).toBe('rotateAgentCredential');
    expect(index.search('remove a thing', 10).map((h) => h.id)).toEqual(['deleteThing', 'listThings']);
    const [direct, synonym] = [index.search('delete', 1)[0]!, index.search('remove', 1)[0]!];
    expect(synonym.score).toBeCloseTo(direct.score / 2);
  });

  it('honours the limit', () => {
    expect(index.search('agent', 1)).toHaveLength(1);
  });
});

describe('buildCatalog', () => {
  const document = {
    paths: {
      '/v1/nodes/{node_id}': {
        get: {
          operationId: 'getNode',
          summary: 'Get a node',
          tags: ['nodes'],
          parameters: [{ name: 'node_id', in: 'path', required: true, schema: { type: 'string' } }],
          responses: { '200': { description: 'Default Response', content: { 'application/json': { schema: { $ref: '#/components/schemas/Node' } } } }, '404': { description: 'Missing' } },
        },
      },
    },
    components: { schemas: { Node: { type: 'object', properties: { id: { type: 'string' }, parent: { $ref: '#/components/schemas/Node' }, tag: { $ref: '#/components/schemas/Tag' } } }, Tag: { type: 'string' } } },
  };

  it('inlines component schemas, keeping a self-reference as a reference, and drops placeholder descriptions', () => {
    const op = buildCatalog(document).find('getNode')!;
    expect(op).toMatchObject({ method: 'GET', path: '/v1/nodes/{node_id}', tag: 'nodes', summary: 'Get a node' });
    expect(op.responses).toEqual([
      { status: '200', schema: { type: 'object', properties: { id: { type: 'string' }, parent: { $ref: '#/components/schemas/Node' }, tag: { type: 'string' } } } },
      { status: '404', description: 'Missing' },
    ]);
    expect(op.parameters).toEqual([{ name: 'node_id', in: 'path', required: true, schema: { type: 'string' } }]);
  });

  it('searches operations by intent', () => {
    expect(buildCatalog(document).search('show me a node', 5).map((op) => op.operationId)).toEqual(['getNode']);
  });
});
