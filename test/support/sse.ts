/** A server-sent events reader over fetch: each event as it arrives, comments (heartbeats) counted. */
export interface SseEvent {
  readonly event: string;
  readonly id: string | undefined;
  readonly data: unknown;
  /** performance.now() when it was read. */
  readonly at: number;
}

export interface SseStream {
  readonly status: number;
  readonly headers: Headers;
  readonly events: SseEvent[];
  readonly comments: string[];
  /** The next event (after those already taken) whose name is `event` and that `match` accepts. */
  next(event: string, match?: (data: unknown) => boolean, timeoutMs?: number): Promise<SseEvent>;
  /** Resolves when the server ends the stream. */
  readonly ended: Promise<void>;
  close(): void;
}

export async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  const abort = new AbortController();
  const response = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: abort.signal });
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const waiters = new Set<() => void>();
  const taken = new Set<SseEvent>();
  const ended = (async () => {
    if (response.status !== 200) return void (await response.body?.cancel());
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of response.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const fields = new Map<string, string>();
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.includes(':')) fields.set(line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trimStart());
          }
          if (fields.has('data')) events.push({ event: fields.get('event') ?? 'message', id: fields.get('id'), data: JSON.parse(fields.get('data')!), at: performance.now() });
          for (const wake of waiters) wake();
        }
      }
    } catch {
      // aborted by close()
    }
  })();
  return {
    status: response.status,
    headers: response.headers,
    events,
    comments,
    ended,
    next(event, match = () => true, timeoutMs = 5_000) {
      return new Promise((resolve, reject) => {
        const look = () => {
          const found = events.find((e) => !taken.has(e) && e.event === event && match(e.data));
          if (!found) return false;
          taken.add(found);
          waiters.delete(check);
          clearTimeout(timer);
          resolve(found);
          return true;
        };
        const check = () => void look();
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no ${event} event within ${timeoutMs} ms (had ${events.map((e) => e.event).join(', ')})`));
        }, timeoutMs);
        if (!look()) waiters.add(check);
      });
    },
    close: () => abort.abort(),
  };
}
