/**
 * Cancel requests: a new connection to the upstream (over TLS when the sslmode asks for it, as
 * PostgreSQL accepts cancel requests over SSL) carrying CancelRequest for a backend's key.
 */
import { serialize } from 'pg-protocol';
import { bounded, openTransport, type BackendKey, type TransportTarget } from './connection.js';
import { DISCARD } from '../inlet.js';

/**
 * Asks the upstream to cancel what the backend of `backendKey` is running, within the target's
 * connect timeout. PostgreSQL answers nothing, it closes the connection; true when it did so after
 * receiving the request. Failures are not thrown: a cancel is best effort.
 */
export async function sendCancel(target: TransportTarget, backendKey: BackendKey): Promise<boolean> {
  const label = `upstream ${target.host}:${target.port} (cancel)`;
  try {
    return await bounded(label, target.connectTimeoutMs, undefined, async (guard) => {
      const inlet = await openTransport(target, label, guard);
      const { socket } = inlet;
      const closed = new Promise<boolean>((resolve) => socket.once('close', (hadError: boolean) => resolve(!hadError)));
      socket.end(serialize.cancel(backendKey.processId, backendKey.secretKey.readInt32BE(0)));
      inlet.receive(DISCARD);
      return await closed;
    });
  } catch {
    return false;
  }
}

/**
 * When a statement's client went away, the gateway cancels it at once and again a little later:
 * PostgreSQL drops a CancelRequest that reaches a backend between two protocol messages (between
 * the Bind and the Execute of a batch already in its socket, say), and its connection, dropped by
 * then, is noticed only when the backend next writes. A backend that is gone ignores the others.
 */
export const ABANDONED_CANCEL_DELAYS_MS: readonly number[] = [0, 100, 1_000, 5_000];

export function cancelAbandoned(cancel: () => Promise<unknown>): void {
  for (const delay of ABANDONED_CANCEL_DELAYS_MS) setTimeout(() => void cancel(), delay).unref();
}
