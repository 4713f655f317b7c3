/**
 * `npm run bench:hold`: one deployment of `bench:e2e` (PGWARD_BENCH_DEPLOYMENTS, `serve` unless
 * given; the first named) on a fresh `pgbench -i -s 10` upstream, provisioned and held open until
 * Ctrl-C, for measuring by hand: profilers, `strace -c`, `perf`, pgbench runs of one's own. It
 * writes what to connect to and which processes are whose (the proxy's port, the open and
 * realistic logins, the pids of each process group, the state database's URL, the project and
 * the deployment's PGWARD_* settings for its CLI) as JSON to
 * PGWARD_BENCH_HOLD_FILE (default /tmp/pgward-hold.json), and stops and cleans up on SIGINT or SIGTERM.
 */
import { writeFile } from 'node:fs/promises';
import { prepareWorkspace, runBench, subset } from './bench-kit.js';
import { benchUpstream, DEPLOYMENTS, startServe, startSplit } from './e2e-deployments.js';

const SCALE = 10;
const NATS_URL = process.env.NATS_URL || 'nats://127.0.0.1:4222';
const HOLD_FILE = process.env.PGWARD_BENCH_HOLD_FILE || '/tmp/pgward-hold.json';
const log = (line: string): void => console.log(`[bench:hold] ${line}`);

runBench('bench:hold', async (teardown, signal) => {
  const [name = 'serve'] = subset('PGWARD_BENCH_DEPLOYMENTS', DEPLOYMENTS);
  const { binaries } = await prepareWorkspace('bench-hold', teardown, log);
  const { admin, direct, upstream } = await benchUpstream(binaries.pgbench, SCALE, teardown, signal);
  const deployment = name === 'serve' ? await startServe(upstream, admin, teardown) : await startSplit(upstream, admin, NATS_URL, teardown);
  const pids = Object.fromEntries(await Promise.all(Object.entries(deployment.processes).map(async ([what, of]) => [what, await of()] as const)));
  // Its PGWARD_* settings, for running its CLI (`pgward audit verify`, `admin`): the file holds secrets, so only its owner reads it.
  const env = Object.fromEntries(Object.entries(deployment.env).filter(([key]) => key.startsWith('PGWARD_')));
  const held = { deployment: name, proxyPort: deployment.proxyPort, logins: deployment.logins, direct, pids, stateUrl: deployment.stateUrl, projectId: deployment.provisioned.projectId, env, pgbench: binaries.pgbench };
  await writeFile(HOLD_FILE, `${JSON.stringify(held, null, 2)}\n`, { mode: 0o600 });
  log(`${deployment.description}; held (${HOLD_FILE}), Ctrl-C stops it`);
  await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
});
