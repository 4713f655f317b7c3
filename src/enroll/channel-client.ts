import type { Logger } from '../logger.js';
import { ChannelEnd, ENROLLMENT_END_HEADER } from './wire.js';

/** The control plane refused the token for good (revoked, expired): nothing the data plane asks will be answered again. */
export class ChannelEnded extends Error {
  override readonly name = 'ChannelEnded';
  constructor(readonly end: ChannelEnd) {
    super(`the control plane ended this data plane’s channel (${end.reason}): ${end.detail}`);
  }
}

/** A request the control plane answered with an error (a problem+json `detail` when it sent one). */
export class ChannelRequestFailed extends Error {
  override readonly name = 'ChannelRequestFailed';
  constructor(
    readonly status: number,
    message: string,
    readonly body: Record<string, unknown>,
  ) {
    super(message);
  }
}

/**
 * The data plane's side of its channel to the control plane: HTTP(S) requests authenticated by
 * the enrollment token. The first answer saying the token no longer authenticates ends the
 * channel: every listener hears it once, and every later request fails at once.
 */
export class ChannelClient {
  private ended: ChannelEnd | undefined;
  private readonly listeners = new Set<(end: ChannelEnd) => void>();

  constructor(
    readonly baseUrl: URL,
    private readonly token: string,
    readonly logger: Logger,
  ) {}

  get end(): ChannelEnd | undefined {
    return this.ended;
  }

  onEnd(listener: (end: ChannelEnd) => void): void {
    this.listeners.add(listener);
  }

  /** Ends the channel for `end` (the first reason stays). */
  close(end: ChannelEnd): void {
    if (this.ended) return;
    this.ended = end;
    for (const listener of this.listeners) listener(end);
  }

  /** The response of a request; a 401 that names an end ends the channel, and any 401 throws. */
  async fetch(method: 'GET' | 'POST', path: string, options: { body?: unknown; signal?: AbortSignal } = {}): Promise<Response> {
    if (this.ended) throw new ChannelEnded(this.ended);
    const response = await fetch(new URL(path, this.baseUrl), {
      method,
      headers: { authorization: `Bearer ${this.token}`, ...(options.body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    if (response.status !== 401) return response;
    const body = (await response.json().catch(() => ({}))) as Record<string, unknown>;
    const detail = typeof body.detail === 'string' ? body.detail : 'the enrollment token was refused';
    const reason = ChannelEnd.shape.reason.safeParse(response.headers.get(ENROLLMENT_END_HEADER));
    if (reason.success) {
      this.close({ reason: reason.data, detail });
      throw new ChannelEnded(this.ended!);
    }
    throw new ChannelRequestFailed(401, `the control plane refused the enrollment token: ${detail}`, body);
  }

  /** A JSON request whose answer must be 2xx. */
  async json<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    const response = await this.fetch(method, path, { body });
    const parsed = (await response.json().catch(() => ({}))) as Record<string, unknown>;
    if (!response.ok) throw new ChannelRequestFailed(response.status, `${method} ${path.split('?')[0]}: ${response.status} ${typeof parsed.detail === 'string' ? parsed.detail : ''}`.trim(), parsed);
    return parsed as T;
  }
}
