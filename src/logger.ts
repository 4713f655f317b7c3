import { pino, type DestinationStream, type Logger } from 'pino';

/**
 * Structured logs on stdout (or `destination`): one JSON object a line, `time` in ISO 8601 UTC.
 * Secret-bearing fields are redacted wherever they appear. Child loggers bind keys the base does
 * not hold (pid, hostname), so no line repeats a key.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ['password', '*.password', 'api_key', '*.api_key', 'mcp_token', '*.mcp_token', 'connection_string', '*.connection_string', 'secret', '*.secret', 'authorization', '*.authorization', 'headers.authorization', 'req.headers.authorization'],
      censor: '[redacted]',
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
export type { Logger };
