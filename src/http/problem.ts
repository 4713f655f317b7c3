import { z } from 'zod';

/** The problem codes of spec §7 that pgward answers with, and their HTTP status. */
export const problemCatalog = {
  INVALID_INPUT: { status: 400, title: 'The body or a parameter failed validation; the same request will fail again.' },
  UNAUTHORIZED: { status: 401, title: 'No credential, or an expired, revoked or malformed one.' },
  PAYMENT_REQUIRED: { status: 402, title: 'The operation is charged per request and this one is unsettled; WWW-Authenticate carries the Payment challenge to answer.' },
  FORBIDDEN: { status: 403, title: 'The caller’s role lacks the permission.' },
  PLAN_LIMIT_REACHED: { status: 403, title: 'The organization’s plan excludes the feature or a quota is spent; retrying does not help.' },
  NOT_FOUND: { status: 404, title: 'The resource does not exist or is not visible to the caller.' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'The path exists, but not for this method; `Allow` lists the accepted ones.' },
  RESOURCE_EXISTS: { status: 409, title: 'The name or value is taken.' },
  INVALID_STATE: { status: 409, title: 'The resource’s state forbids the operation.' },
  IDEMPOTENCY_KEY_REUSED: { status: 409, title: 'The Idempotency-Key was used with a different request.' },
  CONFLICT: { status: 409, title: 'The request conflicts with the current state.' },
  DNS_VERIFICATION_FAILED: { status: 409, title: 'The domain’s TXT record carrying its dns_verification_token was not found; publish it (dns_instructions) and retry.' },
  LAST_OWNER: { status: 409, title: 'The change would leave the organization without an owner; make another member owner first.' },
  ALREADY_A_MEMBER: { status: 409, title: 'The person is already a member of the organization; change their role instead.' },
  INVITATION_ALREADY_ACCEPTED: { status: 409, title: 'The invitation was already accepted; an invitation admits one person once.' },
  INVITATION_EMAIL_MISMATCH: { status: 403, title: 'The invitation is for another e-mail address than the signed-in person’s.' },
  INVITATION_REVOKED: { status: 410, title: 'The invitation was revoked; ask for a new one.' },
  INVITATION_EXPIRED: { status: 410, title: 'The invitation expired (7 days after it was made); ask for a new one.' },
  PRECONDITION_FAILED: { status: 412, title: 'If-Match does not match the current representation; nothing was modified.' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'The body exceeds 2 MB.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'The body is not JSON, or was sent without Content-Type.' },
  RATE_LIMITED: { status: 429, title: 'The quota for this credential or address is spent; wait Retry-After seconds.' },
  INTERNAL_ERROR: { status: 500, title: 'The server failed; retrying may help.' },
  BAD_GATEWAY: { status: 502, title: 'The upstream answered badly.' },
  SERVICE_UNAVAILABLE: { status: 503, title: 'Temporarily unable; wait Retry-After seconds.' },
  TIMEOUT: { status: 504, title: 'The upstream took too long.' },
  DEMO_NOT_CONFIGURED: { status: 503, title: 'This deployment has no demo database, or no policy for the tier asked; do not retry.' },
  DEMO_PAUSED: { status: 503, title: 'The demo is paused by its operator; wait Retry-After seconds.' },
  DEMO_CAPACITY_FULL: { status: 503, title: 'The ceiling on concurrent demo credentials is reached; Retry-After says when the oldest expires.' },
  DEMO_BUSY: { status: 503, title: 'Too many demo credentials are being issued at once; wait Retry-After seconds.' },
  DEMO_TIER_NOT_PURCHASABLE: { status: 503, title: 'The tier asked is a paid one and this deployment takes no payment; ask for the free tier.' },
} as const;

export type ProblemCode = keyof typeof problemCatalog;

export interface FieldError {
  field: string;
  message: string;
}

/** The problem types of the HTTP Payment authentication scheme (draft-httpauth-payment §8.2), on answers about a payment. */
export const PaymentError = z.enum(['payment-required', 'payment-insufficient', 'payment-expired', 'verification-failed', 'malformed-credential', 'invalid-challenge']);
export type PaymentError = z.infer<typeof PaymentError>;

/** A failure the HTTP layer answers as application/problem+json. */
export class Problem extends Error {
  override readonly name = 'Problem';
  readonly status: number;
  constructor(
    readonly code: ProblemCode,
    readonly detail: string,
    readonly options: { errors?: FieldError[]; headers?: Record<string, string>; paymentError?: PaymentError } = {},
  ) {
    super(detail);
    this.status = problemCatalog[code].status;
  }
}

export function problemType(code: ProblemCode): string {
  return `/v1/problems/${code}`;
}

export const ProblemBody = z
  .object({
    type: z.string().describe('URI of the code’s catalog entry'),
    code: z.string().describe('Identity of the condition; branch on it. The set is open.'),
    status: z.int(),
    detail: z.string().describe('Free text; may change; never match on it'),
    request_id: z.string().describe('Repeats the X-Request-Id response header'),
    errors: z.array(z.object({ field: z.string().describe('Dotted path into the request body or parameter name'), message: z.string() })).optional(),
    payment_error: PaymentError.optional().describe('On an answer about a payment: the Payment scheme’s problem type (docs/payments.md)'),
  })
  .meta({ id: 'Problem' });
export type ProblemBody = z.infer<typeof ProblemBody>;

export function problemBody(problem: Problem, requestId: string): ProblemBody {
  return {
    type: problemType(problem.code),
    code: problem.code,
    status: problem.status,
    detail: problem.detail,
    request_id: requestId,
    ...(problem.options.errors ? { errors: problem.options.errors } : {}),
    ...(problem.options.paymentError ? { payment_error: problem.options.paymentError } : {}),
  };
}
