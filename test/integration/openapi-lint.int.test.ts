import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApi, type TestApi } from '../support/api.js';

let api: TestApi;
let dir: string;

beforeAll(async () => {
  api = await startApi('openapi_lint');
  dir = await mkdtemp(join(tmpdir(), 'pgward-openapi-'));
});
afterAll(async () => {
  await api?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('OpenAPI document', () => {
  it('passes `redocly lint` with no errors and no warnings', async () => {
    const file = join(dir, 'openapi.json');
    await writeFile(file, (await api.app.inject({ method: 'GET', url: '/v1/openapi.json' })).body);
    const { stdout } = await promisify(execFile)(resolve('node_modules/.bin/redocly'), ['lint', file, '--format=json'], { timeout: 60_000 }).catch((error: { stdout: string }) => error);
    const report = JSON.parse(stdout) as { totals: { errors: number; warnings: number }; problems: { message: string }[] };
    expect(report.problems.map((p) => p.message)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  });
});
