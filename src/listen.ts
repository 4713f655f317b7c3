import { createServer } from 'node:net';

/** A listener that could not bind: one line naming the address and the setting that chose it. */
export class ListenError extends Error {
  override readonly name = 'ListenError';
  constructor(
    readonly variable: string,
    readonly address: string,
    readonly reason: string,
  ) {
    super(`cannot listen on ${address} (${variable}): ${reason}`);
  }
}

const REASONS: Readonly<Record<string, string>> = {
  EADDRINUSE: 'address already in use',
  EACCES: 'permission denied',
  EADDRNOTAVAIL: 'no such address on this machine',
};

/** Runs `listen`; a failure to bind becomes a ListenError naming `variable`, anything else passes through. */
export async function listenOn<T>(variable: string, host: string, port: number, listen: () => Promise<T>): Promise<T> {
  try {
    return await listen();
  } catch (error) {
    const reason = REASONS[(error as { code?: unknown }).code as string];
    if (reason) throw new ListenError(variable, `${host}:${port}`, reason);
    throw error;
  }
}

/** Binds `host:port` and lets it go again: a taken port fails as listenOn's ListenError would. Port 0 (any free port) is never taken. */
export async function ensureFree(variable: string, host: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await listenOn(variable, host, port, () => new Promise<void>((resolve, reject) => probe.once('error', reject).listen({ host, port }, resolve)));
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}
