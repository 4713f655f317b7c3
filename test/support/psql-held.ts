import { spawn } from 'node:child_process';

export interface PsqlRun {
  /** Its exit code, stdout and stderr once it exits. */
  readonly done: Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** Settles the moment stderr first shows the marker (by default the NOTICE of a statement held for approval). */
  readonly saw: Promise<void>;
  /** Ctrl-C: psql sends a cancel request. */
  interrupt(): void;
}

/** `psql -c sql` as a child process on `connectionString`, stopping at the first error. */
export function psqlCommand(connectionString: string, sql: string, marker = 'waiting for a reviewer'): PsqlRun {
  const child = spawn('psql', [connectionString, '-X', '-v', 'ON_ERROR_STOP=1', '-c', sql], { env: { ...process.env, PGCONNECT_TIMEOUT: '10' } });
  let stdout = '';
  let stderr = '';
  let seen: () => void = () => undefined;
  const saw = new Promise<void>((resolve) => (seen = resolve));
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    if (stderr.includes(marker)) seen();
  });
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { done, saw, interrupt: () => child.kill('SIGINT') };
}
