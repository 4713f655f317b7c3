import { createLogger, type Logger } from '../../src/logger.js';

/** The keys any object in a JSON text holds more than once (JSON.parse would keep only the last). */
export function duplicateKeys(json: string): string[] {
  const found: string[] = [];
  let at = 0;
  const space = (): void => {
    while (/\s/.test(json[at] ?? '')) at++;
  };
  const string = (): string => {
    const start = at;
    for (at++; json[at] !== '"'; at++) if (json[at] === '\\') at++;
    at++;
    return JSON.parse(json.slice(start, at)) as string;
  };
  const value = (): void => {
    space();
    const c = json[at];
    if (c === '{') {
      const keys = new Set<string>();
      at++;
      space();
      if (json[at] === '}') return void at++;
      for (;;) {
        space();
        const key = string();
        if (keys.has(key)) found.push(key);
        keys.add(key);
        space();
        at++; // ':'
        value();
        space();
        if (json[at++] === '}') return;
      }
    }
    if (c === '[') {
      at++;
      space();
      if (json[at] === ']') return void at++;
      for (;;) {
        value();
        space();
        if (json[at++] === ']') return;
      }
    }
    if (c === '"') return void string();
    while (at < json.length && !/[,}\]\s]/.test(json[at]!)) at++;
  };
  value();
  return found;
}

export interface CapturedLogs {
  /** pgward's own logger (src/logger.ts) at info, writing here. */
  readonly logger: Logger;
  /** Every line written so far, as written. */
  readonly lines: string[];
  /** The parsed lines whose `event` is `event`. */
  events(event: string): Record<string, unknown>[];
}

/** A real pgward logger whose output the test reads line by line. */
export function captureLogs(): CapturedLogs {
  const lines: string[] = [];
  const logger = createLogger('info', { write: (chunk: string) => void lines.push(...chunk.split('\n').filter(Boolean)) });
  return {
    logger,
    lines,
    events: (event) => lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.event === event),
  };
}
