import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { Problem, ProblemBody } from '../problem.js';
import type { Api, ApiDeps } from './support.js';

export const PROXY_CA_PATH = '/v1/proxy/ca.pem';

const PEM_TYPE = 'application/x-pem-file';

/** The CA certificate clients verify the proxy's TLS with (docs/proxy.md#tls): public, as a certificate is. */
export function proxyCaRoutes(app: Api, deps: Pick<ApiDeps, 'proxyCaFile'>): void {
  app.get(
    PROXY_CA_PATH,
    {
      config: { public: true },
      schema: {
        operationId: 'getProxyCaCertificate',
        summary: 'The CA certificate that verifies the Postgres proxy',
        description:
          'PEM. Save it and connect with sslmode=verify-full and sslrootcert=<the file> (libpq, psycopg, JDBC), or pass it as ssl.ca (node-postgres, postgres.js). 404 when the operator’s certificate comes from a CA they did not publish here (PGWARD_TLS_CA); a publicly trusted certificate verifies with the system’s roots.',
        tags: ['discovery'],
        security: [],
        response: {
          200: { description: 'The CA certificate (PEM)', content: { [PEM_TYPE]: { schema: z.string() } } },
          404: ProblemBody,
          429: ProblemBody,
          500: ProblemBody,
        },
      },
    },
    async (_request, reply) => {
      const pem = deps.proxyCaFile ? await readFile(deps.proxyCaFile, 'utf8').catch(() => undefined) : undefined;
      if (pem === undefined) {
        throw new Problem('NOT_FOUND', deps.proxyCaFile ? 'the proxy has not generated its certificate yet: it does once it starts' : 'this deployment publishes no CA for the proxy (PGWARD_TLS_CA); its certificate verifies with the system’s trusted roots');
      }
      return reply.type(PEM_TYPE).header('cache-control', 'no-cache').send(pem);
    },
  );
}
