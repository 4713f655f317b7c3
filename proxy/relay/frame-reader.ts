import type { Inlet } from '../inlet.js';
import { HandshakeError, takeFrame, type Frame } from './handshake.js';

/**
 * The one handshake frame the other end sends before it waits for an answer: read whole from
 * `inlet`, which is let go once it is. Rejects when the stream ends first, breaks the framing, or
 * carries bytes beyond the frame (nothing may follow it before the answer).
 */
export function readFrame(inlet: Inlet): Promise<Frame> {
  return new Promise((resolve, reject) => {
    let pending: Buffer = Buffer.alloc(0);
    const fail = (error: Error): void => {
      inlet.receive(undefined);
      reject(error);
    };
    inlet.receive({
      bytes(chunk) {
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        let taken: ReturnType<typeof takeFrame>;
        try {
          taken = takeFrame(pending);
        } catch (error) {
          return fail(error as Error);
        }
        if (!taken) return;
        if (taken.rest.length > 0) return fail(new HandshakeError('bytes after a handshake frame, before its answer'));
        inlet.receive(undefined);
        resolve(taken.frame);
      },
      ended(error) {
        fail(error ?? new HandshakeError('the link closed during the handshake'));
      },
    });
  });
}
