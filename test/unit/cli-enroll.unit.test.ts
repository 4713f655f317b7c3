/** `pgward serve --enroll`: what is wrong with the flags or their variables is named, exit 2, before anything starts. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli.js';
import { freePort } from '../support/free-port.js';

const TOKEN = `pgw_enr_${'x'.repeat(43)}`;

async function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number; error: string }> {
  const errors: string[] = [];
  vi.spyOn(console, 'error').mockImplementation((line: string) => void errors.push(line));
  for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
  const code = await main(['serve', ...args]);
  return { code, error: (errors[0] ?? '').split('\n')[0]! };
}

afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

describe('pgward serve --enroll', () => {
  it('refuses a malformed token, a token without a control plane, a control plane without a token, a bad URL, and other roles beside it', async () => {
    expect(await run(['--role', 'proxy', '--enroll', 'pgw_enr_short', '--control-plane', 'http://127.0.0.1:1'])).toEqual({ code: 2, error: 'pgward: --enroll and --control-plane: PGWARD_ENROLL_TOKEN expected a self-host enrollment token (pgw_enr_...)' });
    expect(await run(['--role', 'proxy', '--enroll', TOKEN])).toEqual({ code: 2, error: 'pgward: --enroll needs --control-plane <url> (or PGWARD_CONTROL_PLANE_URL)' });
    expect(await run(['--role', 'proxy'], { PGWARD_CONTROL_PLANE_URL: 'http://127.0.0.1:1' })).toEqual({ code: 2, error: 'pgward: --control-plane is given without --enroll <token> (or PGWARD_ENROLL_TOKEN)' });
    expect(await run(['--role', 'proxy', '--enroll', TOKEN, '--control-plane', 'ftp://x'])).toEqual({ code: 2, error: 'pgward: --enroll and --control-plane: PGWARD_CONTROL_PLANE_URL expected the http(s) URL of the control plane’s API' });
    expect(await run(['--role', 'api', '--role', 'proxy', '--enroll', TOKEN, '--control-plane', 'http://127.0.0.1:1'])).toEqual({ code: 2, error: 'pgward: --enroll runs a data plane: use it with --role proxy alone' });
  });

  it('reads the token from PGWARD_ENROLL_TOKEN and stops with the reason when the control plane cannot be reached (exit 1)', async () => {
    const closed = await freePort();
    const result = await run(['--role', 'proxy'], { PGWARD_ENROLL_TOKEN: TOKEN, PGWARD_CONTROL_PLANE_URL: `http://127.0.0.1:${closed}`, PGWARD_LOG_LEVEL: 'silent' });
    expect(result).toEqual({ code: 1, error: `pgward: cannot reach the control plane at http://127.0.0.1:${closed}: ECONNREFUSED` });
  });
});
