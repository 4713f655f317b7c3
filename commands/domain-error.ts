/** Why a command was refused. Codes are the problem codes of spec §7 that HTTP answers with. */
export type DomainErrorCode =
  | 'INVALID_INPUT'
  | 'NOT_FOUND'
  | 'RESOURCE_EXISTS'
  | 'INVALID_STATE'
  | 'CONFLICT'
  | 'PLAN_LIMIT_REACHED'
  | 'FORBIDDEN'
  | 'PRECONDITION_FAILED'
  | 'LAST_OWNER'
  | 'ALREADY_A_MEMBER'
  | 'INVITATION_EMAIL_MISMATCH'
  | 'INVITATION_ALREADY_ACCEPTED'
  | 'INVITATION_REVOKED'
  | 'INVITATION_EXPIRED';

export class DomainError extends Error {
  override readonly name = 'DomainError';
  constructor(
    readonly code: DomainErrorCode,
    message: string,
  ) {
    super(message);
  }
}
