import { Resolver } from 'node:dns/promises';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HostnameInput, hostnameProblem } from '../../src/events/domains.js';
import { parseDnsServers, verificationRecordName } from '../../src/domains/dns.js';

const label = fc.stringMatching(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/);

describe('custom domain host names', () => {
  it('accepts every name of 2+ well-formed labels within 253 characters whose last label is not all digits', () => {
    fc.assert(
      fc.property(fc.array(label, { minLength: 2, maxLength: 6 }), (labels) => {
        const name = labels.join('.');
        const expected = name.length <= 253 && !/^[0-9]+$/.test(labels.at(-1)!);
        expect(hostnameProblem(name) === undefined).toBe(expected);
      }),
    );
  });

  it('stores a request’s name lowercased; refuses non-ASCII before lowercasing', () => {
    expect(HostnameInput.parse('DB.Example.COM')).toBe('db.example.com');
    expect(HostnameInput.safeParse('\u212Aample.com').success).toBe(false);
    expect(HostnameInput.safeParse('ex\u0130mple.com').success).toBe(false);
  });

  it('names the TXT record `_pgward.<domain>`', () => {
    expect(verificationRecordName('db.example.com')).toBe('_pgward.db.example.com');
  });
});

describe('PGWARD_DNS_SERVERS', () => {
  it('takes addresses with optional ports, IPv4 and IPv6', () => {
    const servers = parseDnsServers('127.0.0.1:5353, 1.1.1.1,[::1]:53,::1,[::1]');
    expect(servers).toEqual(['127.0.0.1:5353', '1.1.1.1', '[::1]:53', '::1', '[::1]']);
    // What it accepts, node's resolver takes.
    expect(() => new Resolver().setServers(servers)).not.toThrow();
  });

  it('refuses names, bad ports and empty lists', () => {
    for (const bad of ['', ' , ', 'dns.google', '127.0.0.1:0', '127.0.0.1:65536', '300.1.1.1', '[::1', '127.0.0.1:53x']) expect(() => parseDnsServers(bad), bad).toThrow();
  });
});
