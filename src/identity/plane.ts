import type pg from 'pg';
import { createJwtVerifier, type JwtCaller, type JwtVerifier } from '../auth/jwt.js';
import { publicUrl as publicUrlOf, type Config } from '../config.js';
import type { Keyring } from '../crypto/seal.js';
import type { Logger } from '../logger.js';
import type { Caller } from '../http/plugins/auth.js';
import type { EventStore } from '../store/port.js';
import { identitySecret, ownKeys, sessionCaller, signUpEffects, tokenCaller } from './people.js';
import { issuerOf } from './routes.js';
import { apiResource, createIdentityServer, identityOptions, migrateIdentity, type IdentityServer } from './server.js';
import { parseSsoProviders, signInOptions, type SignInOptions } from './sso.js';

/** The identity server as the control plane uses it. */
export interface IdentityPlane {
  readonly server: IdentityServer;
  readonly publicUrl: string;
  readonly issuer: string;
  /** Verifies the access tokens this identity server issued (against its own key set). */
  readonly tokens: JwtVerifier;
  readonly session: (headers: Headers, named?: string) => Promise<Caller | undefined>;
  /** The caller a verified token of this identity server acts as (docs/identity.md#the-acting-organization). */
  readonly person: (token: JwtCaller, named?: string) => Promise<Caller>;
  /** What the sign-in page offers besides e-mail and password. */
  readonly signInOptions: SignInOptions;
  migrate(): Promise<void>;
}

export function identityPlane(config: Config, keyring: Keyring, store: EventStore, pool: pg.Pool, logger?: Logger): IdentityPlane {
  const publicUrl = publicUrlOf(config);
  const effects = signUpEffects(store, pool);
  const ssoProviders = config.PGWARD_SSO_PROVIDERS ? parseSsoProviders(config.PGWARD_SSO_PROVIDERS) : [];
  const options = identityOptions({ pool, publicUrl, secret: identitySecret(keyring), ssoProviders, effects, ...(logger ? { logger } : {}) });
  const issuer = issuerOf(publicUrl);
  // Created once its tables exist: Better Auth checks its schema when it starts and would report them missing.
  let server: IdentityServer | undefined;
  const serverOf = (): IdentityServer => {
    if (!server) throw new Error('the identity server is used before its tables were migrated');
    return server;
  };
  return {
    get server() {
      return serverOf();
    },
    publicUrl,
    issuer,
    tokens: createJwtVerifier({ jwks: ownKeys(serverOf), issuer, audience: apiResource(publicUrl) }),
    session: sessionCaller(serverOf, effects),
    person: tokenCaller(effects),
    signInOptions: signInOptions(ssoProviders),
    async migrate() {
      await migrateIdentity(pool, options);
      server ??= createIdentityServer(options);
      // Better Auth checks its tables in the background once created; that check is shared, so
      // awaiting it here makes the API ready only once it passed, and no stop cuts it short.
      await (await server.$context).checkSchema?.();
    },
  };
}
