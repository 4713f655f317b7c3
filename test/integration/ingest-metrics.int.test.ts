/**
 * What ingest reports on /metrics (issue 18 item 6): every bus record appended, dropped or failed,
 * the gap markers it appends and the decisions they say were lost, and the checkpoints it could
 * not sign; against the real PostgreSQL event store and the in-process bus.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import type { Registry } from 'prom-client';
import { auditStream } from '../../projections/audit.js';
import { generateAnchorKey, loadAnchorKey } from '../../src/crypto/checkpoint.js';
import { AuditCheckpointSigned, StatementDecided } from '../../src/events/audit.js';
import { createMetrics } from '../../src/metrics.js';
import { useIngestFixture } from '../support/ingest-fixture.js';
import { admin } from '../support/pg.js';
import { metricValue } from '../support/pgward-process.js';
import { waitFor } from '../support/wire.js';

const PROJECT = 'prj_ingestmetrics00000000000';
const fixture = useIngestFixture('ingest_metrics', PROJECT, 'metered-proxy');
const { publish, batch } = fixture;
const gap = (from: number, to: number) => fixture.gap(from, to, 'proxy_buffer_full');

let metrics: ReturnType<typeof createMetrics>;

beforeEach(() => {
  metrics = createMetrics('ingest');
});

const trailLength = async () => (await fixture.store.readStream(auditStream(PROJECT))).length;
const value = async (registry: Registry, name: string, labels: Record<string, string> = {}) => metricValue(await registry.metrics(), name, labels);

describe('ingest metrics', () => {
  it('counts records appended, dropped and failed, gap markers by reason and the decisions they lost', async () => {
    // The store refuses decisions for a while: the first record fails, and is delivered again.
    await admin(fixture.db.url, (client) => client.query(`alter table pgward.events add constraint no_decisions check (type <> '${StatementDecided.type}') not valid`));
    const ingest = await fixture.start({ holeGraceMs: 50, observe: metrics.ingest });
    await publish(batch(1, 2));
    await waitFor(async () => ((await value(metrics.registry, 'pgward_ingest_records_total', { outcome: 'failed' })) ?? 0) >= 1, 10_000, 'a failed record');
    await admin(fixture.db.url, (client) => client.query('alter table pgward.events drop constraint no_decisions'));
    await waitFor(async () => (await trailLength()) === 2, 10_000, '1..2 appended');
    const failed = await value(metrics.registry, 'pgward_ingest_records_total', { outcome: 'failed' });

    await publish(gap(3, 5));
    await publish(batch(6));
    await publish('not json');
    await publish(JSON.stringify({ kind: 'batch', decisions: [{ event: 'query' }] }));
    // 7..8 never arrive: a hole, recorded by the sweep once its grace passed.
    await publish(batch(9));
    await waitFor(async () => (await trailLength()) === 5, 10_000, 'gap and 6, 9 appended');
    await new Promise((resolve) => setTimeout(resolve, 100));
    await ingest.sweepHoles();

    const registry = metrics.registry;
    expect({
      appended: await value(registry, 'pgward_ingest_records_total', { outcome: 'appended' }),
      dropped: await value(registry, 'pgward_ingest_records_total', { outcome: 'dropped' }),
      failed: await value(registry, 'pgward_ingest_records_total', { outcome: 'failed' }),
      proxyGaps: await value(registry, 'pgward_audit_gaps_total', { reason: 'proxy_buffer_full' }),
      proxyLost: await value(registry, 'pgward_audit_gap_decisions_total', { reason: 'proxy_buffer_full' }),
      holes: await value(registry, 'pgward_audit_gaps_total', { reason: 'sequence_hole' }),
      holeLost: await value(registry, 'pgward_audit_gap_decisions_total', { reason: 'sequence_hole' }),
    }).toEqual({ appended: 4, dropped: 2, failed, proxyGaps: 1, proxyLost: 3, holes: 1, holeLost: 2 });
    expect(failed).toBeGreaterThanOrEqual(1);
  });

  it('counts a checkpoint it could not sign when due', async () => {
    await admin(fixture.db.url, (client) => client.query(`alter table pgward.events add constraint no_checkpoints check (type <> '${AuditCheckpointSigned.type}') not valid`));
    const anchor = loadAnchorKey(generateAnchorKey());
    await fixture.start({ observe: metrics.ingest, checkpoints: { every: 5, keys: { keys: new Map() }, anchor: { keyId: 'metered-anchor', privateKey: anchor.privateKey } } });
    expect(await value(metrics.registry, 'pgward_audit_checkpoint_failures_total')).toBe(0);
    await publish(batch(1, 2, 3, 4, 5, 6));
    await waitFor(async () => ((await value(metrics.registry, 'pgward_audit_checkpoint_failures_total')) ?? 0) >= 1, 10_000, 'a checkpoint failure counted');
  });
});
