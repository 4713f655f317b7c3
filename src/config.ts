import { z } from 'zod';

const port = z.coerce.number({ message: 'expected a port number' }).int('expected a port number').min(1, 'expected a port number from 1 to 65535').max(65535, 'expected a port number from 1 to 65535');
const postgresUrl = z.url({ protocol: /^postgres(ql)?$/, message: 'expected a postgresql:// URL' });

/** Every environment variable pgward reads, validated once at start. */
export const ConfigSchema = z.object({
  PGWARD_STATE_URL: postgresUrl.optional(),
  EVENTSTORE_URL: z.url({ protocol: /^(esdb|esdb\+discover|kurrentdb|kurrentdb\+discover)$/, message: 'expected an esdb:// connection string' }).optional(),
  NATS_URL: z.url({ protocol: /^(nats|tls)$/, message: 'expected a nats:// URL' }).optional(),
  PGWARD_DATA_DIR: z.string().min(1, 'expected a directory path').default('./.pgward'),
  PGWARD_HTTP_PORT: port.default(8080),
  PGWARD_PROXY_PORT: port.default(6432),
  PGWARD_EMBEDDED_PG_PORT: port.default(54329),
  PGWARD_LISTEN_HOST: z.string().min(1, 'expected a host address').default('127.0.0.1'),
  PGWARD_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});
export type Config = z.infer<typeof ConfigSchema>;

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly variable: string,
    readonly expected: string,
  ) {
    super(`invalid configuration: ${variable} ${expected}`);
  }
}

/** Reads the configuration from `env`; empty strings count as unset. Throws ConfigError naming the first bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const keys = Object.keys(ConfigSchema.shape) as (keyof Config)[];
  const input = Object.fromEntries(keys.map((key) => [key, env[key] === '' ? undefined : env[key]]));
  const parsed = ConfigSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  // The value itself is not echoed: a URL variable may carry a password.
  throw new ConfigError(String(issue.path[0]), issue.message);
}
