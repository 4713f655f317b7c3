import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installConventions } from '../../src/http/conventions.js';
import { proxyCaRoutes } from '../../src/http/routes/proxy-ca.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pgward-ca-route-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** GET /v1/proxy/ca.pem of an app serving `proxyCaFile`. */
async function getCa(proxyCaFile: string | undefined) {
  const app = Fastify();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  installConventions(app);
  proxyCaRoutes(app.withTypeProvider<ZodTypeProvider>(), proxyCaFile ? { proxyCaFile } : {});
  try {
    return await app.inject({ method: 'GET', url: '/v1/proxy/ca.pem' });
  } finally {
    await app.close();
  }
}

describe('GET /v1/proxy/ca.pem', () => {
  it('serves the file as PEM', async () => {
    const file = join(dir, 'ca.pem');
    await writeFile(file, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    const response = await getCa(file);
    expect([response.statusCode, response.headers['content-type'], response.body]).toEqual([200, 'application/x-pem-file', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n']);
  });

  it('answers 404 with a problem when the operator publishes no CA, or the proxy has not made its own yet', async () => {
    const none = await getCa(undefined);
    expect(none.statusCode).toBe(404);
    expect(none.json()).toMatchObject({ code: 'NOT_FOUND', detail: 'this deployment publishes no CA for the proxy (PGWARD_TLS_CA); its certificate verifies with the system’s trusted roots' });
    const notYet = await getCa(join(dir, 'not-generated.pem'));
    expect(notYet.statusCode).toBe(404);
    expect(notYet.json()).toMatchObject({ code: 'NOT_FOUND', detail: 'the proxy has not generated its certificate yet: it does once it starts' });
  });
});
