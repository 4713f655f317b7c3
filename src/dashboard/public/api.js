// The REST API, same-origin. A signed-in human's session cookie goes along (credentials: 'same-origin');
// an organization API key, when the person signed in with one, lives only in this tab's sessionStorage
// and is sent as a bearer header: never in a URL, never in localStorage, never logged.

const KEY = 'pgward.orgKey';
const ORG = 'pgward.actingOrg';

export const orgKey = {
  get: () => sessionStorage.getItem(KEY),
  set: (key) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

/** The organization a signed-in person chose to act in (the switcher), sent as X-Pgward-Org (docs/identity.md#the-acting-organization). */
export const actingOrg = {
  get: () => sessionStorage.getItem(ORG),
  set: (orgId) => sessionStorage.setItem(ORG, orgId),
  clear: () => sessionStorage.removeItem(ORG),
};

/** A problem+json answer (docs/http-api.md): `code`, `detail` and, on validation failures, `errors[]`. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail ?? `HTTP ${status}`);
    this.status = status;
    this.code = problem?.code ?? null;
    this.errors = problem?.errors ?? [];
  }
}

/** One call: `{data, etag}`. `create` adds an Idempotency-Key; `ifMatch` a precondition. */
export async function request(method, path, body, { create = false, ifMatch } = {}) {
  const headers = { accept: 'application/json' };
  const key = orgKey.get();
  if (key) headers.authorization = `Bearer ${key}`;
  else if (actingOrg.get()) headers['x-pgward-org'] = actingOrg.get();
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (create) headers['idempotency-key'] = crypto.randomUUID();
  if (ifMatch) headers['if-match'] = ifMatch;
  const response = await fetch(path, { method, headers, credentials: 'same-origin', cache: 'no-store', ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const type = response.headers.get('content-type') ?? '';
  const data = response.status === 204 || !type.includes('json') ? null : await response.json();
  if (!response.ok) throw new ApiError(response.status, data);
  return { data, etag: response.headers.get('etag') };
}

export const api = {
  get: async (path) => (await request('GET', path)).data,
  post: async (path, body, options) => (await request('POST', path, body, options)).data,
  patch: async (path, body, options) => (await request('PATCH', path, body, options)).data,
  del: async (path, options) => (await request('DELETE', path, undefined, options)).data,
};

/** `path?query` from the non-empty members of `query`. */
export function withQuery(path, query) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== null && value !== '') params.set(name, String(value));
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

/** Better Auth's email and password endpoints (the identity server, /api/auth/*): a session cookie, nothing for this page to keep. */
export async function identity(path, body) {
  const response = await fetch(`/api/auth/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    credentials: 'same-origin',
    cache: 'no-store',
    body: JSON.stringify(body ?? {}),
  });
  const data = (response.headers.get('content-type') ?? '').includes('json') ? await response.json() : null;
  if (!response.ok) throw new ApiError(response.status, { detail: data?.message ?? data?.error_description ?? data?.detail ?? `the identity server answered ${response.status}`, code: data?.code });
  return data;
}

/** A GET of the identity server (or of a public path beside it): null when it answers 401. */
export async function getJson(path) {
  const response = await fetch(path, { headers: { accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' });
  if (response.status === 401) return null;
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, { detail: data?.error_description ?? data?.message ?? data?.detail ?? `the identity server answered ${response.status}` });
  return data;
}
