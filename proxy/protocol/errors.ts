/** SQLSTATE protocol_violation: the peer sent bytes that are not valid PostgreSQL protocol. */
export const PROTOCOL_VIOLATION = '08P01';

/** A malformed or oversized message. The connection that sent it must be closed; no other is affected. */
export class ProtocolViolation extends Error {
  override readonly name = 'ProtocolViolation';
  readonly code = PROTOCOL_VIOLATION;
}
