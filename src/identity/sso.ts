import { z } from 'zod';

/** One OIDC single sign-on provider (PGWARD_SSO_PROVIDERS, a JSON array): people sign in at /api/auth/sign-in/oauth2 with its provider_id. */
export const SsoProvider = z.strictObject({
  provider_id: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'expected a provider id of [a-z0-9-]'),
  discovery_url: z.url({ protocol: /^https?$/, message: 'expected the http(s) URL of the provider’s /.well-known/openid-configuration' }),
  client_id: z.string().min(1),
  client_secret: z.string().min(1),
  scopes: z.array(z.string().min(1)).default(['openid', 'profile', 'email']),
});
export type SsoProvider = z.infer<typeof SsoProvider>;

/** Parses PGWARD_SSO_PROVIDERS; throws naming the first problem. */
export function parseSsoProviders(spec: string): SsoProvider[] {
  const parsed = z.array(SsoProvider).safeParse(JSON.parse(spec));
  if (!parsed.success) throw new Error(`${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`);
  if (new Set(parsed.data.map((p) => p.provider_id)).size !== parsed.data.length) throw new Error('names a provider twice');
  return parsed.data;
}
