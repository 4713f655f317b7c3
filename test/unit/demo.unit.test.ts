import { describe, expect, it } from 'vitest';
import { demo } from '../../commands/demo/demo.js';
import { DomainError } from '../../commands/domain-error.js';
import { loadConfig } from '../../src/config.js';
import { demoStatus, PAID_TIER_REFUSAL, tierOffers, treatments } from '../../src/demo/offer.js';
import { demoSettings } from '../../src/demo/settings.js';
import { demoBanner } from '../../src/demo/start.js';

const provisioned = { org_id: 'org_demo1', project_id: 'prj_demo1', database_id: 'db_demo1', tiers: [{ tier: 'free' as const, policy_id: 'pol_demo1' }] };

describe('demo settings (PGWARD_DEMO)', () => {
  it('is on for the embedded default, off on an external state database, and PGWARD_DEMO decides when set', () => {
    const state = 'postgresql://pgward@db.internal/pgward';
    expect(demoSettings(loadConfig({}))).toEqual({ ttlSeconds: 900, maxCredentials: 50, vendsPerAddressPerHour: 20 });
    expect(demoSettings(loadConfig({ PGWARD_STATE_URL: state }))).toBeUndefined();
    expect(demoSettings(loadConfig({ PGWARD_STATE_URL: state, PGWARD_DEMO: 'on', PGWARD_DEMO_TTL_SECONDS: '60' }))?.ttlSeconds).toBe(60);
    expect(demoSettings(loadConfig({ PGWARD_DEMO: 'off' }))).toBeUndefined();
    expect(() => loadConfig({ PGWARD_DEMO: 'yes' })).toThrow('invalid configuration: PGWARD_DEMO expected on or off');
    expect(() => loadConfig({ PGWARD_DEMO_TTL_SECONDS: '5' })).toThrow('invalid configuration: PGWARD_DEMO_TTL_SECONDS expected at least 10');
  });
});

describe('the demo aggregate', () => {
  const at = '2026-01-01T00:00:00.000Z';
  it('provisions once, pauses and resumes, and asking for the state it is in decides nothing', () => {
    expect(demo.decide(demo.initial, { kind: 'pause', reason: '' }, at)).toEqual(new DomainError('NOT_FOUND', 'this deployment has no demo'));
    const ready = { ...demo.initial, provisioned };
    expect(demo.decide(ready, { kind: 'provision', demo: provisioned }, at)).toBeInstanceOf(DomainError);
    expect(demo.decide(ready, { kind: 'resume' }, at)).toEqual([]);
    expect(demo.decide({ ...ready, paused: true, pausedReason: 'x' }, { kind: 'pause', reason: 'y' }, at)).toEqual([]);
  });
});

describe('the demo offer', () => {
  it('hides a table off the allowlist whole, masks the masked columns, and honours schema.*', () => {
    const offer = treatments({ allowed_tables: ['public.*'], masked_columns: { 'public.secrets.api_key': 'redact' } });
    expect(offer.map((t) => t.treatment)).toEqual(['allowed', 'allowed', 'allowed']);
    expect(offer[2]!.columns.map((c) => [c.name, c.treatment, c.mask])).toEqual([
      ['id', 'allowed', null],
      ['customer_id', 'allowed', null],
      ['card_token', 'allowed', null],
      ['api_key', 'masked', 'redact'],
    ]);
    const none = treatments({ allowed_tables: [], masked_columns: { 'public.customers.email': 'hash' } });
    expect(none[0]!.columns.find((c) => c.name === 'email')).toMatchObject({ treatment: 'hidden', mask: null });
  });

  it('says not_configured without settings or provisioning, paused when paused; only the free tier is available', () => {
    const settings = { ttlSeconds: 1, maxCredentials: 1, vendsPerAddressPerHour: 1 };
    expect(demoStatus(undefined, { ...demo.initial, provisioned })).toBe('not_configured');
    expect(demoStatus(settings, demo.initial)).toBe('not_configured');
    expect(demoStatus(settings, { provisioned, paused: true, pausedReason: '' })).toBe('paused');
    expect(tierOffers({ ...demo.initial, provisioned }, () => undefined).map((t) => [t.tier, t.available, t.policy_id])).toEqual([
      ['free', true, 'pol_demo1'],
      ['pro', false, null],
      ['scale', false, null],
      ['enterprise', false, null],
    ]);
  });

  it('offers a paid tier when the deployment prices it and the demo has its policy, with its price', () => {
    const withPro = { ...provisioned, tiers: [...provisioned.tiers, { tier: 'pro' as const, policy_id: 'pol_demo2' }] };
    const priced = (tier: string) => (tier === 'pro' || tier === 'scale' ? { amount: 50, currency: 'usd' } : undefined);
    expect(tierOffers({ ...demo.initial, provisioned: withPro }, priced).map((t) => [t.tier, t.available, t.policy_id, t.price])).toEqual([
      ['free', true, 'pol_demo1', null],
      ['pro', true, 'pol_demo2', { amount: 50, currency: 'usd' }],
      ['scale', false, null, null],
      ['enterprise', false, null, null],
    ]);
    expect(tierOffers({ ...demo.initial, provisioned: withPro }, priced)[2]!.detail).toBe('no policy for this tier');
    expect(tierOffers({ ...demo.initial, provisioned: withPro }, () => undefined)[1]!.detail).toBe(PAID_TIER_REFUSAL);
  });

  it('prints a psql command and an MCP client configuration, or how to get a credential', () => {
    const banner = demoBanner('http://127.0.0.1:8080', { connection_string: 'postgresql://agt_x:pw@localhost:6432/pgward_demo', mcp_url: 'http://localhost:8080/mcp', mcp_token: 'pgw_agt_t', expires_at: '2026-01-01T00:15:00.000Z' });
    expect(banner.split('\n')[1]).toBe('  psql: psql "postgresql://agt_x:pw@localhost:6432/pgward_demo" -c "select id, name, email from customers order by id limit 5"');
    expect(banner.split('\n')[2]).toBe('  MCP client configuration: {"mcpServers":{"pgward-demo":{"type":"http","url":"http://localhost:8080/mcp","headers":{"Authorization":"Bearer pgw_agt_t"}}}}');
    expect(demoBanner('http://127.0.0.1:8080', undefined)).toContain('curl -X POST http://127.0.0.1:8080/v1/demo/credentials');
  });
});
