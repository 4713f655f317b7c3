/**
 * The identity server (docs/identity.md): Better Auth on the state PostgreSQL (schema `identity`),
 * mounted under /api/auth. People sign up and in with e-mail and password, a TOTP second factor,
 * passkeys, or a configured OIDC or SAML provider; MCP clients register themselves (RFC 7591) and get
 * JWT access tokens through the authorization code flow with PKCE. Organizations, memberships and
 * consents stay events (commands/organizations, src/events/identity.ts).
 */
import { oauthProvider } from '@better-auth/oauth-provider';
import { passkey } from '@better-auth/passkey';
import { sso } from '@better-auth/sso';
import { betterAuth, type BetterAuthOptions } from 'better-auth';
import { APIError, createAuthMiddleware } from 'better-auth/api';
import { getSchema } from 'better-auth/db';
import { getMigrations } from 'better-auth/db/migration';
import { genericOAuth, jwt, twoFactor } from 'better-auth/plugins';
import { PostgresDialect } from 'kysely';
import type pg from 'pg';
import { canonicalize } from '../crypto/canonical-json.js';
import { sha256Hex } from '../crypto/tokens.js';
import { newId } from '../ids.js';
import type { Logger } from '../logger.js';
import type { OidcProvider, SamlProvider, SsoProvider } from './sso.js';

/** The Postgres schema Better Auth's tables live in, beside the event store and the read models. */
export const IDENTITY_SCHEMA = 'identity';
/** Where the identity server is mounted: the spec's issuer is `{auth_url}/api/auth`. */
export const AUTH_BASE_PATH = '/api/auth';
/** The header the HTTP layer sets to the client's address (after trusted proxies); a client's own value is replaced. */
export const CLIENT_IP_HEADER = 'x-pgward-client-ip';
/** The pages (served by the dashboard) the OAuth provider sends a browser to: sign in, then allow or deny the application. */
export const OAUTH_LOGIN_PAGE = '/sign-in';
export const OAUTH_CONSENT_PAGE = '/consent';
export const SCOPES = ['openid', 'profile', 'email', 'offline_access'] as const;

/** What happens when a person signs up: their organization and their consents, as events. */
export interface SignUpEffects {
  onUserCreated(user: { id: string; name: string; email: string }, request: { ip: string | null; acceptedTerms: boolean }): Promise<void>;
  /** A person's memberships, oldest first (the first is where a token is issued for and a session acts by default). */
  membershipsOf(userId: string): Promise<{ orgId: string; role: string }[]>;
}

export interface IdentityOptions {
  pool: pg.Pool;
  /** The public origin of the API, e.g. `https://pgward.example.com` (issuer and cookies derive from it). */
  publicUrl: string;
  /** At least 32 bytes of secret material: cookie signing and encryption of the key set at rest. */
  secret: string;
  ssoProviders: readonly SsoProvider[];
  effects: SignUpEffects;
  /** Where Better Auth's own messages go (structured); its arguments are left out, as they may carry request data. */
  logger?: Logger;
}

/** The `resource` (RFC 8707) access tokens are bound to: the REST API and the management MCP under one origin. */
export function apiResource(publicUrl: string): string {
  return `${new URL(publicUrl).origin}/v1/mcp`;
}

/** pgward's SAML entity id at an IdP unless configured: the URL of its SP metadata for that provider. */
function samlEntityId(publicUrl: string, provider: SamlProvider): string {
  return provider.sp_entity_id ?? `${new URL(publicUrl).origin}${AUTH_BASE_PATH}/sso/saml2/sp/metadata?providerId=${provider.provider_id}`;
}

/**
 * The providers are configuration only: the SSO plugin's endpoints through which a signed-in person
 * would register, list, change or delete providers of their own are not offered.
 */
const SSO_MANAGEMENT_PATHS = ['/sso/register', '/sso/providers', '/sso/get-provider', '/sso/update-provider', '/sso/delete-provider', '/sso/callback'];

function oidcPlugins(providers: readonly OidcProvider[]) {
  if (providers.length === 0) return [];
  return [genericOAuth({ config: providers.map((p) => ({ providerId: p.provider_id, discoveryUrl: p.discovery_url, clientId: p.client_id, clientSecret: p.client_secret, scopes: [...p.scopes], pkce: true })) })];
}

function samlPlugins(providers: readonly SamlProvider[], publicUrl: string) {
  if (providers.length === 0) return [];
  return [
    sso({
      defaultSSO: providers.map((p) => ({
        providerId: p.provider_id,
        // Only matched when a sign-in names an e-mail domain instead of the provider; the page always names the provider.
        domain: '',
        samlConfig: {
          issuer: samlEntityId(publicUrl, p),
          entryPoint: p.entry_point,
          cert: p.idp_certificate,
          idpMetadata: { entityID: p.idp_entity_id },
          ...(p.audience ? { audience: p.audience } : {}),
          wantAssertionsSigned: true,
        },
      })),
      // Fail closed: no unsolicited (IdP-initiated) responses, assertions must bound their validity, no SHA-1 or RSA1_5.
      saml: { allowIdpInitiated: false, requireTimestamps: true, algorithms: { onDeprecated: 'reject' } },
    }),
  ];
}

function identityLog(logger: Logger) {
  const child = logger.child({ component: 'identity' });
  return (level: 'debug' | 'info' | 'warn' | 'error', message: string): void => child[level](message);
}

export function identityOptions(options: IdentityOptions) {
  const origin = new URL(options.publicUrl).origin;
  const { effects } = options;
  const oidc = options.ssoProviders.filter((p): p is OidcProvider => p.kind === 'oidc');
  const saml = options.ssoProviders.filter((p): p is SamlProvider => p.kind === 'saml');
  return {
    appName: 'pgward',
    baseURL: origin,
    basePath: AUTH_BASE_PATH,
    secret: options.secret,
    database: { dialect: new PostgresDialect({ pool: options.pool }), type: 'postgres', schemaName: IDENTITY_SCHEMA, transaction: true },
    telemetry: { enabled: false },
    ...(options.logger ? { logger: { level: 'warn' as const, log: identityLog(options.logger) } } : {}),
    trustedOrigins: [origin],
    emailAndPassword: { enabled: true, minPasswordLength: 12, maxPasswordLength: 256 },
    // On whatever NODE_ENV says (Better Auth's default is production only): per client address and path, in memory of the API process.
    rateLimit: {
      enabled: true,
      window: 60,
      max: 600,
      customRules: { '/sign-in/*': { window: 10, max: 10 }, '/sign-up/*': { window: 10, max: 10 }, '/two-factor/*': { window: 10, max: 10 } },
    },
    // The OAuth provider issues tokens at /oauth2/token; the JWT plugin's session-to-JWT endpoint is not offered.
    // SSO_MANAGEMENT_PATHS: SAML providers come from PGWARD_SSO_PROVIDERS only.
    disabledPaths: ['/token', ...(saml.length > 0 ? SSO_MANAGEMENT_PATHS : [])],
    advanced: {
      cookiePrefix: 'pgward',
      useSecureCookies: origin.startsWith('https:'),
      defaultCookieAttributes: { sameSite: 'lax', httpOnly: true },
      ipAddress: { ipAddressHeaders: [CLIENT_IP_HEADER] },
      database: { generateId: ({ model }: { model: string }) => (model === 'user' ? newId('usr_') : newId('ida_')) },
    },
    hooks: {
      before: createAuthMiddleware(async (ctx) => {
        // A sign-up is the acceptance of the current terms and privacy policy, so it must say so.
        if (ctx.path === '/sign-up/email' && (ctx.body as { accept_terms?: unknown } | undefined)?.accept_terms !== true) {
          throw new APIError('BAD_REQUEST', { code: 'TERMS_NOT_ACCEPTED', message: 'sign-up requires accept_terms: true (the terms of service and the privacy policy, docs/identity.md)' });
        }
      }),
    },
    databaseHooks: {
      user: {
        create: {
          after: async (user: { id: string; name: string; email: string }, ctx: { request?: Request; body?: unknown } | null) => {
            const ip = ctx?.request?.headers.get(CLIENT_IP_HEADER) ?? null;
            await effects.onUserCreated(user, { ip, acceptedTerms: (ctx?.body as { accept_terms?: unknown } | undefined)?.accept_terms === true });
          },
        },
      },
    },
    plugins: [
      jwt({ jwks: { keyPairConfig: { alg: 'EdDSA', crv: 'Ed25519' } } }),
      twoFactor({ issuer: 'pgward' }),
      passkey({ rpID: new URL(origin).hostname, rpName: 'pgward', origin }),
      ...oidcPlugins(oidc),
      ...samlPlugins(saml, options.publicUrl),
      // What @better-auth/mcp configures, without its refusal of http resources on non-loopback hosts (PGWARD_PUBLIC_URL decides).
      oauthProvider({
        resources: [apiResource(options.publicUrl)],
        clientRegistrationDefaultResources: [apiResource(options.publicUrl)],
        refreshTokenReuseInterval: 30,
        loginPage: OAUTH_LOGIN_PAGE,
        consentPage: OAUTH_CONSENT_PAGE,
        scopes: [...SCOPES],
        grantTypes: ['authorization_code', 'refresh_token'],
        // RFC 7591 registration is open to OAuth client apps (MCP clients); agents get credentials through the REST API only.
        allowDynamicClientRegistration: true,
        allowUnauthenticatedClientRegistration: true,
        clientRegistrationDefaultScopes: [...SCOPES],
        // pgward's JWT claims (docs/permissions.md): the organization the token acts in by default (the person's first) and their role there when issued.
        customAccessTokenClaims: async ({ user }) => {
          const membership = user ? (await effects.membershipsOf(user.id))[0] : undefined;
          return membership ? { org_id: membership.orgId, role: membership.role } : {};
        },
      }),
    ],
  } satisfies BetterAuthOptions;
}

type Built = ReturnType<typeof identityOptions>;

export function createIdentityServer(options: Built) {
  return betterAuth(options);
}

export type IdentityServer = ReturnType<typeof createIdentityServer>;

const MIGRATION_LOCK = `hashtext('pgward identity migrations')`;

/**
 * What Better Auth's tables are migrated to: its schema as the plugins declare it (tables, fields,
 * indexes; a function default or hook counts as present) and each plugin's id and version.
 */
export function identitySchemaFingerprint(options: BetterAuthOptions): string {
  const declared = JSON.parse(JSON.stringify(getSchema(options), (_key, value: unknown) => (typeof value === 'function' ? 'function' : value))) as unknown;
  const plugins = (options.plugins ?? []).map((plugin) => [plugin.id, 'version' in plugin ? String(plugin.version) : null]);
  return sha256Hex(canonicalize({ schema: declared, plugins }));
}

/**
 * Creates or extends Better Auth's tables in the `identity` schema (additive only: an unsafe change
 * stops start-up); one process at a time. The schema's comment keeps the fingerprint it was last
 * migrated to, so a start whose fingerprint is already there skips Better Auth's introspection.
 */
export async function migrateIdentity(pool: pg.Pool, options: BetterAuthOptions): Promise<'current' | 'migrated'> {
  const fingerprint = identitySchemaFingerprint(options);
  const client = await pool.connect();
  try {
    await client.query(`select pg_advisory_lock(${MIGRATION_LOCK})`);
    const stored = await client.query<{ fingerprint: string | null }>(`select obj_description(to_regnamespace($1)::oid, 'pg_namespace') as fingerprint`, [IDENTITY_SCHEMA]);
    if (stored.rows[0]?.fingerprint === fingerprint) return 'current';
    await client.query(`create schema if not exists ${IDENTITY_SCHEMA}`);
    const { runMigrations } = await getMigrations(options);
    await runMigrations();
    await client.query(`comment on schema ${IDENTITY_SCHEMA} is '${fingerprint}'`);
    return 'migrated';
  } finally {
    await client.query(`select pg_advisory_unlock(${MIGRATION_LOCK})`).catch(() => undefined);
    client.release();
  }
}
