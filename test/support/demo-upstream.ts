import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import type { DemoUpstream } from '../../src/demo/provision.js';
import { admin } from './pg.js';

/** A fresh shop database for the demo on the test server, and how to drop it and its reader role. */
export function demoUpstream(label: string): DemoUpstream & { drop(): Promise<void> } {
  const upstream = { adminUrl: inject('pgUrl'), database: `pgward_t_${label}_${randomBytes(4).toString('hex')}` };
  return {
    ...upstream,
    drop: () =>
      admin(upstream.adminUrl, async (client) => {
        await client.query(`drop database if exists ${pg.escapeIdentifier(upstream.database)} with (force)`);
        await client.query(`drop role if exists ${pg.escapeIdentifier(`${upstream.database}_reader`)}`);
      }),
  };
}
