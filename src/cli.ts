import { parseArgs } from 'node:util';
import { z, ZodError } from 'zod';
import { createOrganization } from '../commands/organizations/create-organization.js';
import { Plan } from './events/organizations.js';
import { projectionsFor } from '../projections/index.js';
import { auditExport, auditVerify } from './audit/cli.js';
import { auditKeysFrom } from './audit/keys.js';
import { newOperatorToken } from './auth/operators.js';
import { projectionStatus, rebuildAndVerify, resetProjection } from '../projections/maintenance.js';
import type { Projection } from '../projections/projection.js';
import { ConfigError, ConfigSchema, loadConfig, type Config } from './config.js';
import { serveEnrolled, type Enrollment } from './enroll/serve-enrolled.js';
import { announceDemo } from './demo/start.js';
import { createLogger } from './logger.js';
import { openEventStore, Role, serve } from './main.js';
import { createPool } from './pg/pool.js';
import { openStateDatabase } from './state.js';
import { superviseServe } from './workers/supervisor.js';
import { runWorker } from './workers/worker.js';

const HELP = `pgward — a Postgres gateway for AI agents

Usage: pgward <command> [options]

Commands:
  serve --role proxy --enroll TOKEN --control-plane URL
                                         run a self-hosted data plane enrolled with a control plane
                                         (PGWARD_ENROLL_TOKEN and PGWARD_CONTROL_PLANE_URL also work): docs/self-host.md
  serve [--role api|projector|proxy|ingest ...]
                                         run pgward. Without --role: the proxy in this process, ingest and
                                         the projections in one worker process, the API in another, each
                                         restarted when it fails; /healthz and /metrics of every process on
                                         the API's port. With --role: the given roles in this one process
                                         (the split deployment), serving their own /healthz and /metrics
  worker NAME --role ...                 a worker process of pgward serve (started by it, not by hand)
  projections list                       each projection's checkpoint, the store head and the lag
  projections rebuild [NAME] --verify    replay NAME (or all) from position 0 into a scratch schema and
                                         compare digests with the live read model; exit 1 on a difference
  projections rebuild NAME               empty NAME's read model; the running projector replays it
  audit verify --project ID [--from-events]
                                         verify a project's audit chain from the read model; with --from-events
                                         also recompute it from the event store and name the first diverging row
  audit export --project ID              the project's entries and checkpoints as JSON Lines, with the anchor key
  admin create-org --name NAME [--plan free|pro|scale|enterprise]
                                         create an organization; prints {"org_id","api_key"} (owner key, shown once)
  admin operator-token --name NAME       a new operator token (shown once) and the PGWARD_OPERATOR_TOKENS entry
                                         admitting it: prints {"token","entry"} (docs/support.md)
  help                                   this text

Configuration is read from the environment: see README.md.`;

class UsageError extends Error {}

function json(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), 2);
}

async function withState<T>(config: Config, work: (ctx: { store: Awaited<ReturnType<typeof openEventStore>>; pool: ReturnType<typeof createPool> }) => Promise<T>): Promise<T> {
  const state = await openStateDatabase(config, { reuseRunning: true });
  const pool = createPool(state.url, { max: 4, applicationName: 'pgward-cli' });
  const store = await openEventStore(config, state.url);
  try {
    return await work({ store, pool });
  } finally {
    await store.close();
    await pool.end();
    await state.close();
  }
}

function selectProjections(projections: readonly Projection[], name: string | undefined): readonly Projection[] {
  if (!name) return projections;
  const projection = projections.find((p) => p.name === name);
  if (!projection) throw new UsageError(`unknown projection ${name}; known: ${projections.map((p) => p.name).join(', ')}`);
  return [projection];
}

/** Signals that stop `pgward serve`: SIGHUP too, as a closing terminal or a launcher's ending shell sends it. */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
/** What stopping may take beyond the drain before the process exits anyway (its embedded PostgreSQL told to stop). */
const STOP_GRACE_MS = 30_000;

async function runServe(config: Config, args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { role: { type: 'string', multiple: true }, enroll: { type: 'string' }, 'control-plane': { type: 'string' } } });
  const roles = parseRoles(values.role ?? Role.options);
  const enrollment = enrollmentOf(config, values.enroll, values['control-plane'], values.role);
  const logger = createLogger(config.PGWARD_LOG_LEVEL);
  // Caught from the start: a signal during start-up stops pgward once it is up, never midway. Later
  // signals are no-ops (under `npm start` Ctrl-C arrives twice: from the terminal and from npm).
  let stopSignal: (signal: NodeJS.Signals) => void = () => undefined;
  const stopRequested = new Promise<NodeJS.Signals>((resolve) => (stopSignal = resolve));
  for (const signal of STOP_SIGNALS) process.on(signal, stopSignal);
  const running = enrollment ? await serveEnrolled(config, logger, enrollment) : values.role ? await serve(config, logger, new Set(roles)) : await superviseServe(config, logger);
  console.log(`pgward listening: HTTP ${running.httpUrl} (GET /healthz, GET /metrics)${running.proxyPort ? `, Postgres proxy ${config.PGWARD_LISTEN_HOST}:${running.proxyPort}` : ''}`);
  if (!values.role && !enrollment) await announceDemo(config, logger, running.httpUrl!);
  const signal = await stopRequested;
  logger.info({ signal, drain_timeout_ms: config.PGWARD_DRAIN_TIMEOUT_MS }, 'stopping');
  const overdue = setTimeout(() => {
    logger.error({ after_ms: config.PGWARD_DRAIN_TIMEOUT_MS + STOP_GRACE_MS }, 'stopping took too long; exiting');
    process.exit(1);
  }, config.PGWARD_DRAIN_TIMEOUT_MS + STOP_GRACE_MS).unref();
  await running.stop();
  clearTimeout(overdue);
  logger.info('stopped');
  return 0;
}

/** An enrolled data plane's token and control plane, from the flags or else the environment; undefined when neither names a token. */
function enrollmentOf(config: Config, token: string | undefined, controlPlane: string | undefined, roles: readonly string[] | undefined): Enrollment | undefined {
  const given = ConfigSchema.pick({ PGWARD_ENROLL_TOKEN: true, PGWARD_CONTROL_PLANE_URL: true }).safeParse({
    PGWARD_ENROLL_TOKEN: token ?? config.PGWARD_ENROLL_TOKEN,
    PGWARD_CONTROL_PLANE_URL: controlPlane ?? config.PGWARD_CONTROL_PLANE_URL,
  });
  if (!given.success) throw new UsageError(`--enroll and --control-plane: ${given.error.issues.map((issue) => `${issue.path.join('.')} ${issue.message}`).join('; ')}`);
  const { PGWARD_ENROLL_TOKEN: enrollToken, PGWARD_CONTROL_PLANE_URL: url } = given.data;
  if (!enrollToken) {
    if (url) throw new UsageError('--control-plane is given without --enroll <token> (or PGWARD_ENROLL_TOKEN)');
    return undefined;
  }
  if (!url) throw new UsageError('--enroll needs --control-plane <url> (or PGWARD_CONTROL_PLANE_URL)');
  if (roles && (roles.length !== 1 || roles[0] !== 'proxy')) throw new UsageError('--enroll runs a data plane: use it with --role proxy alone');
  return { token: enrollToken, controlPlane: new URL(url) };
}

function parseRoles(given: readonly string[]): Role[] {
  const roles = z.array(Role).safeParse(given);
  if (!roles.success) throw new UsageError(`--role must be one of ${Role.options.join(', ')}`);
  return roles.data;
}

async function runWorkerCommand(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { role: { type: 'string', multiple: true } } });
  const [name] = positionals;
  if (!name || !values.role) throw new UsageError('worker needs a NAME and --role');
  return runWorker(config, createLogger(config.PGWARD_LOG_LEVEL), name, parseRoles(values.role));
}

async function runProjections(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { verify: { type: 'boolean', default: false } } });
  const [action, name] = positionals;
  const projections = projectionsFor({ auditKeys: auditKeysFrom(config) });
  if (action === 'list') {
    const statuses = await withState(config, ({ store, pool }) => projectionStatus(store, pool, projections));
    console.log(json(statuses));
    return 0;
  }
  if (action === 'rebuild') {
    const selected = selectProjections(projections, name);
    if (!values.verify) {
      if (!name) throw new UsageError('projections rebuild without --verify needs a projection NAME');
      await withState(config, ({ pool }) => resetProjection(pool, selected[0]!));
      console.log(json({ name, reset: true }));
      return 0;
    }
    const results = await withState(config, async ({ store, pool }) => {
      const out = [];
      for (const projection of selected) out.push(await rebuildAndVerify(store, pool, projection));
      return out;
    });
    console.log(json(results));
    return results.every((r) => r.identical) ? 0 : 1;
  }
  throw new UsageError(`unknown projections action ${action ?? '(none)'}; expected list or rebuild`);
}

async function runAdmin(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { name: { type: 'string' }, plan: { type: 'string', default: 'free' } } });
  if (positionals[0] === 'operator-token') {
    if (!values.name) throw new UsageError('admin operator-token needs --name NAME');
    // No state touched: the token is shown once, and the entry (its hash) goes into PGWARD_OPERATOR_TOKENS.
    console.log(JSON.stringify(newOperatorToken(values.name)));
    return 0;
  }
  if (positionals[0] !== 'create-org') throw new UsageError(`unknown admin action ${positionals[0] ?? '(none)'}; expected create-org or operator-token`);
  if (!values.name) throw new UsageError('admin create-org needs --name NAME');
  const plan = Plan.safeParse(values.plan);
  if (!plan.success) throw new UsageError(`--plan must be one of ${Plan.options.join(', ')}`);
  const created = await withState(config, ({ store }) =>
    createOrganization(store, { name: values.name!, plan: plan.data }, { correlationId: `cli-${process.pid}`, actor: 'cli:admin' }),
  );
  console.log(JSON.stringify(created));
  return 0;
}

async function runAudit(config: Config, args: string[]): Promise<number> {
  const [action, ...rest] = args;
  if (action !== 'verify' && action !== 'export') throw new UsageError(`unknown audit action ${action ?? '(none)'}; expected verify or export`);
  if (!rest.includes('--project')) throw new UsageError(`audit ${action} needs --project ID`);
  if (action === 'export') {
    await withState(config, (state) => auditExport(config, rest, state, (line) => process.stdout.write(`${line}\n`)));
    return 0;
  }
  const { report, ok } = await withState(config, (state) => auditVerify(config, rest, state));
  console.log(json(report));
  return ok ? 0 : 1;
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (!command || command === 'help' || command === '--help' || command === '-h') {
      console.log(HELP);
      return command ? 0 : 2;
    }
    const config = loadConfig();
    if (command === 'serve') return await runServe(config, rest);
    if (command === 'worker') return await runWorkerCommand(config, rest);
    if (command === 'projections') return await runProjections(config, rest);
    if (command === 'admin') return await runAdmin(config, rest);
    if (command === 'audit') return await runAudit(config, rest);
    throw new UsageError(`unknown command ${command}`);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`pgward: ${error.message}`);
      return 2;
    }
    if (error instanceof ZodError) {
      console.error(`pgward: invalid input: ${error.issues.map((issue) => `${issue.path.join('.') || 'value'} ${issue.message}`).join('; ')}`);
      return 2;
    }
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      console.error(`pgward: ${(error as Error).message}\n\n${HELP}`);
      return 2;
    }
    console.error(`pgward: ${(error as Error).message}`);
    return 1;
  }
}
