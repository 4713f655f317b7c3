/**
 * Verification of identity-provider JWTs presented to the REST API and the management MCP (§5.2, §5.3).
 * Keys come from the provider's JWKS; every failure is one `JwtRejected` with a reason code.
 */
import { createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from 'jose';
import {
  JOSEAlgNotAllowed,
  JWKSMultipleMatchingKeys,
  JWKSNoMatchingKey,
  JWSSignatureVerificationFailed,
  JWTClaimValidationFailed,
  JWTExpired,
} from 'jose/errors';
import { z } from 'zod';
import { OrgId } from '../events/fields.js';

/** The claims pgward reads; `exp`, `nbf`, `iss` and `aud` are checked by jose. */
export const JwtClaims = z.object({
  sub: z.string().min(1),
  org_id: OrgId,
  role: z.enum(['owner', 'admin', 'member', 'viewer']),
});

export type JwtCaller = { kind: 'jwt'; subject: string; orgId: string; role: z.infer<typeof JwtClaims>['role']; issuer: string };
export type JwtVerifier = { verify(token: string): Promise<JwtCaller> };

export type JwtRejectReason =
  | 'MALFORMED'
  | 'EXPIRED'
  | 'NOT_YET_VALID'
  | 'BAD_SIGNATURE'
  | 'WRONG_ISSUER'
  | 'WRONG_AUDIENCE'
  | 'UNKNOWN_KEY'
  | 'MISSING_CLAIMS'
  | 'JWKS_UNAVAILABLE';

const MESSAGES: Record<JwtRejectReason, string> = {
  MALFORMED: 'the bearer token is not a well-formed JWT',
  EXPIRED: 'the bearer token has expired',
  NOT_YET_VALID: 'the bearer token is not valid yet',
  BAD_SIGNATURE: 'the bearer token signature is invalid or uses a disallowed algorithm',
  WRONG_ISSUER: 'the bearer token was issued by an unexpected issuer',
  WRONG_AUDIENCE: 'the bearer token is not meant for this audience',
  UNKNOWN_KEY: 'the bearer token is signed with a key not in the key set',
  MISSING_CLAIMS: 'the bearer token lacks required claims or has invalid ones',
  JWKS_UNAVAILABLE: 'the identity provider key set is unavailable',
};

/** The message is fixed per reason, so it can never echo the token. */
export class JwtRejected extends Error {
  override readonly name = 'JwtRejected';

  constructor(
    readonly reason: JwtRejectReason,
    cause?: unknown,
  ) {
    super(MESSAGES[reason], { cause });
  }
}

const ALGORITHMS = ['RS256', 'ES256', 'EdDSA'];
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/** Three base64url segments (the last may be empty), which no org API key (`pgw_org_...`) has. */
export function looksLikeJwt(token: string): boolean {
  return JWT_SHAPE.test(token);
}

export function createJwtVerifier(options: {
  /** The provider's JWKS URL, or a resolver of its keys (this deployment's own identity server). */
  jwks: string | JWTVerifyGetKey;
  issuer: string;
  audience: string;
  clockToleranceSeconds?: number;
  cooldownMs?: number;
}): JwtVerifier {
  const jwks = typeof options.jwks === 'string' ? createRemoteJWKSet(new URL(options.jwks), { cooldownDuration: options.cooldownMs }) : options.jwks;
  // Classified here because only the resolver knows that a failure came from fetching the key set.
  const getKey: JWTVerifyGetKey = async (header, token) => {
    try {
      return await jwks(header, token);
    } catch (err) {
      const unknownKey = err instanceof JWKSNoMatchingKey || err instanceof JWKSMultipleMatchingKeys;
      throw new JwtRejected(unknownKey ? 'UNKNOWN_KEY' : 'JWKS_UNAVAILABLE', err);
    }
  };

  return {
    async verify(token) {
      let payload: unknown;
      try {
        ({ payload } = await jwtVerify(token, getKey, {
          issuer: options.issuer,
          audience: options.audience,
          algorithms: ALGORITHMS,
          requiredClaims: ['exp'],
          clockTolerance: options.clockToleranceSeconds,
        }));
      } catch (err) {
        throw toRejection(err);
      }
      const claims = JwtClaims.safeParse(payload);
      if (!claims.success) throw new JwtRejected('MISSING_CLAIMS');
      return { kind: 'jwt', subject: claims.data.sub, orgId: claims.data.org_id, role: claims.data.role, issuer: options.issuer };
    },
  };
}

function toRejection(err: unknown): JwtRejected {
  if (err instanceof JwtRejected) return err;
  if (err instanceof JWTExpired) return new JwtRejected('EXPIRED', err);
  if (err instanceof JWTClaimValidationFailed) return new JwtRejected(claimFailure(err), err);
  if (err instanceof JWSSignatureVerificationFailed || err instanceof JOSEAlgNotAllowed) return new JwtRejected('BAD_SIGNATURE', err);
  return new JwtRejected('MALFORMED', err);
}

function claimFailure(err: JWTClaimValidationFailed): JwtRejectReason {
  if (err.reason === 'missing') return 'MISSING_CLAIMS';
  if (err.claim === 'iss') return 'WRONG_ISSUER';
  if (err.claim === 'aud') return 'WRONG_AUDIENCE';
  if (err.claim === 'nbf' && err.reason === 'check_failed') return 'NOT_YET_VALID';
  return 'MALFORMED';
}
