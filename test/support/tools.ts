import { spawnSync } from 'node:child_process';

/** Why a client program the test drives is missing here, or undefined when it runs. CI installs them all (.ci/run). */
export function missingTool(command: string, args: string[] = ['--version']): string | undefined {
  const result = spawnSync(command, args, { stdio: 'ignore', timeout: 10_000 });
  return result.status === 0 ? undefined : `${[command, ...args].join(' ')} is not available on this machine`;
}
