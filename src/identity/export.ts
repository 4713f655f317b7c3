/**
 * AccountExport (spec §2.12): everything pgward holds about one person, gathered from the identity
 * server (profile, sessions), the read models (organizations, projects, databases, consents) and
 * the event log (what they did: every event whose actor they are).
 */
import { consentsOfUser, membershipsOfUser } from '../../queries/identity.js';
import type { ApiDeps } from '../http/routes/support.js';
import { iso } from '../http/routes/support.js';
import type { IdentityServer } from './server.js';

/** An organization's URL-safe name in the export (pgward addresses organizations by id; the slug is for people). */
export function slugOf(name: string): string {
  return name.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '') || 'organization';
}

/** The latest recorded choice of each e-mail preference; marketing is off and usage-limit alerts on until the person says otherwise. */
function preferences(consents: readonly { document_type: string; accepted: boolean }[]) {
  const latest = (type: string, fallback: boolean) => consents.filter((c) => c.document_type === type).at(-1)?.accepted ?? fallback;
  return { marketing_emails: latest('marketing_emails', false), usage_limit_alerts: latest('usage_limit_alerts', true) };
}

const optional = <K extends string>(key: K, value: string | null | undefined) => (value ? ({ [key]: value } as Record<K, string>) : {});

export async function accountExport(deps: Pick<ApiDeps, 'pool' | 'now'>, identity: IdentityServer, userId: string) {
  const context = await identity.$context;
  const user = await context.internalAdapter.findUserById(userId);
  if (!user) throw new Error(`user ${userId} is signed in but not found`);
  const memberships = await membershipsOfUser(deps.pool, userId);
  const orgIds = memberships.map((m) => m.org_id);
  const [organizations, projects, databases, sessions, consents, actions] = await Promise.all([
    deps.pool.query<{ org_id: string; name: string; created_at: Date }>('select org_id, name, created_at from rm.organizations where org_id = any($1::text[])', [orgIds]),
    deps.pool.query<{ project_id: string; org_id: string; name: string; description: string; status: string; created_at: Date }>(
      'select project_id, org_id, name, description, status, created_at from rm.projects where org_id = any($1::text[]) order by project_id',
      [orgIds],
    ),
    deps.pool.query<{ database_id: string; project_id: string; host: string; port: number; name: string; ssl_mode: string; role: string; created_at: Date }>(
      `select d.database_id, d.project_id, d.host, d.port, d.name, d.ssl_mode, d.role, d.created_at
         from rm.databases d join rm.projects p using (project_id) where p.org_id = any($1::text[]) order by d.database_id`,
      [orgIds],
    ),
    context.internalAdapter.listSessions(userId),
    consentsOfUser(deps.pool, userId),
    // The event log is the audit of what people did; the PostgreSQL event store keeps it in pgward.events.
    deps.pool.query<{ event_id: string; type: string; stream: string; recorded_at: Date }>(
      `select event_id, type, stream, recorded_at from pgward.events where convert_from(metadata, 'UTF8')::jsonb ->> 'actor' = $1 order by position`,
      [`user:${userId}`],
    ),
  ]);
  const roles = new Map(memberships.map((m) => [m.org_id, m.role]));
  return {
    user: { id: user.id, name: user.name, email: user.email, email_verified: user.emailVerified, created_at: iso(user.createdAt), updated_at: iso(user.updatedAt), ...optional('image', user.image) },
    organizations: organizations.rows.map((o) => ({ id: o.org_id, name: o.name, slug: slugOf(o.name), role: roles.get(o.org_id)!, created_at: iso(o.created_at) })),
    projects: projects.rows.map((p) => ({ id: p.project_id, org_id: p.org_id, name: p.name, description: p.description, status: p.status, created_at: iso(p.created_at) })),
    databases: databases.rows.map((d) => ({ id: d.database_id, project_id: d.project_id, host: d.host, port: d.port, name: d.name, ssl_mode: d.ssl_mode, role: d.role, created_at: iso(d.created_at) })),
    sessions: sessions.map((s) => ({ id: s.id, expires_at: iso(s.expiresAt), created_at: iso(s.createdAt), ...optional('ip_address', s.ipAddress), ...optional('user_agent', s.userAgent) })),
    email_preferences: preferences(consents),
    consents: consents.map((c) => ({ id: c.consent_id, document_type: c.document_type, document_version: c.document_version, accepted_at: iso(c.accepted_at), ...optional('ip_address', c.ip_address) })),
    audit_logs: actions.rows.map((a) => {
      const dash = a.stream.indexOf('-');
      return { id: a.event_id, action: a.type.replace(/\.v\d+$/, ''), created_at: iso(a.recorded_at), ...(dash > 0 ? { resource_type: a.stream.slice(0, dash), resource_id: a.stream.slice(dash + 1) } : {}) };
    }),
    exported_at: iso(deps.now()),
  };
}
