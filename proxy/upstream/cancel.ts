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
