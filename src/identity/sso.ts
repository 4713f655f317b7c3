import { X509Certificate } from 'node:crypto';
import { z } from 'zod';

const ProviderId = z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'expected a provider id of [a-z0-9-]');
/** What the sign-in page's button says ("Sign in with …"); the provider id when unset. */
const DisplayName = z.string().trim().min(1).max(64).optional();
const httpUrl = (message: string) => z.url({ protocol: /^https?$/, message });

/** An OpenID Connect provider: people sign in at /api/auth/sign-in/social with its provider_id (Better Auth's generic OAuth plugin). */
export const OidcProvider = z.strictObject({
  kind: z.literal('oidc'),
  provider_id: ProviderId,
  name: DisplayName,
  discovery_url: httpUrl('expected the http(s) URL of the provider’s /.well-known/openid-configuration'),
  client_id: z.string().min(1),
  client_secret: z.string().min(1),
  scopes: z.array(z.string().min(1)).default(['openid', 'profile', 'email']),
});

/** A SAML 2.0 identity provider: people sign in at /api/auth/sign-in/sso with its provider_id (@better-auth/sso). */
export const SamlProvider = z.strictObject({
  kind: z.literal('saml'),
  provider_id: ProviderId,
  name: DisplayName,
  /** The IdP's single sign-on URL (HTTP-Redirect binding): where the AuthnRequest goes. */
  entry_point: httpUrl('expected the http(s) single sign-on URL of the identity provider'),
  /** The IdP's entity id: the Issuer its responses and assertions must name. */
  idp_entity_id: z.string().min(1),
  /** The IdP's signing certificate (PEM): assertions must carry its signature. */
  idp_certificate: z.string().refine(isCertificate, 'expected the identity provider’s signing certificate as PEM (-----BEGIN CERTIFICATE-----)'),
  /** pgward's entity id at this IdP; default: the SP metadata URL `{PGWARD_PUBLIC_URL}/api/auth/sso/saml2/sp/metadata?providerId=…`. */
  sp_entity_id: z.string().min(1).optional(),
  /** The Audience assertions must name; default: the SP entity id. */
  audience: z.string().min(1).optional(),
});

/** One single sign-on provider of PGWARD_SSO_PROVIDERS (a JSON array); an entry without `kind` is OpenID Connect. */
export const SsoProvider = z.preprocess(
  (entry) => (typeof entry === 'object' && entry !== null && !Array.isArray(entry) && !('kind' in entry) ? { ...entry, kind: 'oidc' } : entry),
  z.discriminatedUnion('kind', [OidcProvider, SamlProvider]),
);
export type SsoProvider = z.infer<typeof SsoProvider>;
export type OidcProvider = z.infer<typeof OidcProvider>;
export type SamlProvider = z.infer<typeof SamlProvider>;

function isCertificate(pem: string): boolean {
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) return false;
  try {
    new X509Certificate(pem);
    return true;
  } catch {
    return false;
  }
}

/** Parses PGWARD_SSO_PROVIDERS; throws naming the first problem. */
export function parseSsoProviders(spec: string): SsoProvider[] {
  const parsed = z.array(SsoProvider).safeParse(JSON.parse(spec));
  if (!parsed.success) throw new Error(`${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`);
  if (new Set(parsed.data.map((p) => p.provider_id)).size !== parsed.data.length) throw new Error('names a provider twice');
  return parsed.data;
}

export interface SignInOptions {
  /** Passkeys (WebAuthn) are always offered. */
  passkey: true;
  /** One button per provider: never a secret or an address of the provider. */
  providers: { id: string; name: string; kind: SsoProvider['kind'] }[];
}

/** What the sign-in page offers besides e-mail and password (GET /v1/sign-in-options). */
export function signInOptions(providers: readonly SsoProvider[]): SignInOptions {
  return { passkey: true, providers: providers.map((p) => ({ id: p.provider_id, name: p.name ?? p.provider_id, kind: p.kind })) };
}
