/** Why no relay link to a database's region could be had (docs/regions.md#failing-closed). */
export type RegionFailureReason = 'no_peer' | 'peer_unreachable' | 'peer_untrusted' | 'peer_refused' | 'peer_no_upstream';

/** The origin could not get a relay link; `message` is the operator's (the peer's address, the TLS or refusal detail), never the secret. */
export class RelayError extends Error {
  override readonly name = 'RelayError';
  constructor(
    readonly reason: RegionFailureReason,
    /** The region the link was for. */
    readonly region: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
