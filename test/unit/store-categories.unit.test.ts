import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ALL_EVENTS_CHANNEL, AUDIT_CATEGORY, categoryOf, readsBesideAudit, wakeChannels } from '../../src/store/categories.js';

const name = fc.oneof(fc.string({ maxLength: 60 }), fc.stringMatching(/^[A-Za-z0-9_]{0,45}-?[a-z0-9_-]{0,20}$/), fc.string({ unit: 'grapheme', maxLength: 30 }));

describe('stream categories', () => {
  it('a category is the name up to the first dash, when that is 1 to 40 letters, digits or underscores', () => {
    expect(categoryOf('audit-prj_1')).toBe('audit-');
    expect(categoryOf('credential-agt_1-x')).toBe('credential-');
    expect(categoryOf(`${'a'.repeat(40)}-x`)).toBe(`${'a'.repeat(40)}-`);
    expect(categoryOf(`${'a'.repeat(41)}-x`)).toBeUndefined();
    expect(categoryOf('pipe')).toBeUndefined();
    expect(categoryOf('-audit')).toBeUndefined();
    expect(categoryOf('a.b-c')).toBeUndefined();
    expect(categoryOf('é-x')).toBeUndefined();
  });

  it('subscribers listen per category; a filter that names no category listens to every append', () => {
    expect(wakeChannels(['credential-'])).toEqual(['pgward_events:credential-']);
    expect(wakeChannels(['policy-', 'policy-pol_1', 'project-'])).toEqual(['pgward_events:policy-', 'pgward_events:project-']);
    expect(wakeChannels(undefined)).toEqual([ALL_EVENTS_CHANNEL]);
    expect(wakeChannels([])).toEqual([ALL_EVENTS_CHANNEL]);
    expect(wakeChannels(['proj', 'audit-'])).toEqual([ALL_EVENTS_CHANNEL, 'pgward_events:audit-']);
  });

  it('every stream a prefix matches has the prefix’s category, so its append notifies the channel the subscriber listens to', () => {
    fc.assert(
      fc.property(name, name, (prefix, rest) => {
        const category = categoryOf(prefix);
        if (category !== undefined) expect(categoryOf(prefix + rest)).toBe(category);
      }),
      { numRuns: 2000 },
    );
  });

  it('every channel name fits PostgreSQL’s 63-byte identifiers', () => {
    fc.assert(
      fc.property(name, (prefix) => {
        for (const channel of wakeChannels([prefix])) expect(Buffer.byteLength(channel)).toBeLessThanOrEqual(63);
      }),
      { numRuns: 2000 },
    );
  });

  it('a filter reads beside the audit streams when none of its prefixes can start an audit stream’s name', () => {
    expect(readsBesideAudit(['webhook-', 'credential-', 'auditcp-', 'anomaly-'])).toBe(true);
    expect(readsBesideAudit(['connection-'])).toBe(true);
    expect(readsBesideAudit(['webhook-', 'audit-prj_1'])).toBe(false);
    expect(readsBesideAudit(['audit-'])).toBe(false);
    expect(readsBesideAudit(['aud'])).toBe(false);
    expect(readsBesideAudit([''])).toBe(false);
    expect(readsBesideAudit([])).toBe(false);
    expect(readsBesideAudit(undefined)).toBe(false);
    // Beside the audit streams exactly when no audit stream's name starts with a prefix.
    const auditStream = fc.oneof(name, fc.constantFrom('prj_1', 'x', '')).map((rest) => `${AUDIT_CATEGORY}${rest}`);
    fc.assert(
      fc.property(fc.array(fc.oneof(name, auditStream.map((stream) => stream.slice(0, 3)), auditStream), { minLength: 1, maxLength: 4 }), auditStream, (prefixes, stream) => {
        if (readsBesideAudit(prefixes)) expect(prefixes.some((prefix) => stream.startsWith(prefix))).toBe(false);
        else expect(prefixes.some((prefix) => `${AUDIT_CATEGORY}${prefix.slice(AUDIT_CATEGORY.length)}`.startsWith(prefix))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });
});
