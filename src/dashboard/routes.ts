import { readdirSync, readFileSync } from 'node:fs';
import { extname } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { Problem } from '../http/problem.js';
import { OAUTH_CONSENT_PAGE, OAUTH_LOGIN_PAGE } from '../identity/server.js';

/**
 * The dashboard (docs/dashboard.md): static pages and plain ES modules, no build step. Every page
 * calls the REST API same-origin; the policy below lets the page load only its own files and talk
 * only to its own origin.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

interface Asset {
  readonly body: Buffer;
  readonly type: string;
}

/** The files of `public/`, read once: a request can only name one of them, never a path. */
function loadAssets(): ReadonlyMap<string, Asset> {
  const dir = new URL('./public/', import.meta.url);
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(dir)) {
    const type = TYPES[extname(name)];
    if (type) assets.set(name, { body: readFileSync(new URL(name, dir)), type });
  }
  return assets;
}

function send(reply: FastifyReply, asset: Asset): FastifyReply {
  return reply
    .header('content-security-policy', DASHBOARD_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cache-control', 'no-cache')
    .type(asset.type)
    .send(asset.body);
}

export function dashboardRoutes(app: FastifyInstance): void {
  const assets = loadAssets();
  const index = assets.get('index.html');
  if (!index) throw new Error('the dashboard has no index.html');
  // Where the identity server's OAuth provider sends a browser during an authorization (loginPage, consentPage in identity/server.ts).
  for (const path of [OAUTH_LOGIN_PAGE, OAUTH_CONSENT_PAGE]) app.get(path, { schema: { hide: true } }, async (_request, reply) => send(reply, index));
  app.get('/dashboard', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/dashboard/', 301));
  app.get('/dashboard/', { schema: { hide: true } }, async (_request, reply) => send(reply, index));
  app.get<{ Params: { file: string } }>('/dashboard/:file', { schema: { hide: true } }, async (request, reply) => {
    const asset = assets.get(request.params.file);
    if (!asset) throw new Problem('NOT_FOUND', 'no such dashboard file');
    return send(reply, asset);
  });
}
