import { pino, type Logger } from 'pino';

/** Structured logs on stdout. Secret-bearing fields are redacted wherever they appear. */
export function createLogger(level: string, role = 'pgward'): Logger {
  return pino({
    level,
    base: { role },
    redact: {
      paths: ['password', '*.password', 'api_key', '*.api_key', 'mcp_token', '*.mcp_token', 'connection_string', '*.connection_string', 'authorization', '*.authorization', 'headers.authorization', 'req.headers.authorization'],
      censor: '[redacted]',
    },
  });
}
export type { Logger };
