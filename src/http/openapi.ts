type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function refsIn(value: Json, into: Set<string>): void {
  if (Array.isArray(value)) value.forEach((item) => refsIn(item, into));
  else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (key === '$ref' && typeof item === 'string' && item.startsWith('#/components/schemas/')) into.add(item.slice('#/components/schemas/'.length));
      else refsIn(item, into);
    }
  }
}

/**
 * Keeps only the component schemas the operations reach, directly or through other schemas: the
 * zod registry registers an input and an output variant of every named schema, and most are used once.
 */
export function pruneUnusedSchemas<D extends { paths?: unknown; components?: { schemas?: Record<string, unknown> } }>(document: D): D {
  const schemas = (document.components?.schemas ?? {}) as Record<string, Json>;
  const used = new Set<string>();
  refsIn(document.paths as Json, used);
  for (let frontier = [...used]; frontier.length > 0; ) {
    const next = new Set<string>();
    for (const name of frontier) if (schemas[name] !== undefined) refsIn(schemas[name], next);
    frontier = [...next].filter((name) => !used.has(name));
    frontier.forEach((name) => used.add(name));
  }
  const kept = Object.fromEntries(Object.entries(schemas).filter(([name]) => used.has(name)));
  return { ...document, components: { ...document.components, schemas: kept } };
}
