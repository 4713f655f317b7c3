import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { contains, formatAddress, normalAddress, parseAddress, parseCidr, parseCidrList } from '../../src/net/cidr.js';
import { checkAddress } from '../../src/net/ip-rules.js';

describe('CIDR ranges', () => {
  it('normalises: bare addresses get /32 or /128, host bits are cleared, IPv6 is compressed, IPv4-mapped becomes IPv4', () => {
    expect(
      ['10.1.2.3', '10.1.2.3/8', '0.0.0.0/0', '::1', '2001:DB8:0:0:0:0:0:1', '2001:db8::1/32', '::ffff:127.0.0.2', '::ffff:10.0.0.0/104', '::ffff:0:0/80', '::/0', '::ffff:7f00:2'].map((c) => parseCidr(c).text),
    ).toEqual(['10.1.2.3/32', '10.0.0.0/8', '0.0.0.0/0', '::1/128', '2001:db8::1/128', '2001:db8::/32', '127.0.0.2/32', '10.0.0.0/8', '::/80', '::/0', '127.0.0.2/32']);
  });

  it('refuses what is not a range, saying what is wrong', () => {
    const problems = ['10.0.0.0/33', '::/129', '10.0.0.0/x', '10.0.0.0/', '10.0.0.0/8/8', 'fe80::1%eth0', 'intranet', '', '10.0.0', '010.0.0.1', ' 10.0.0.1', '10.0.0.0/-1', '10.0.0.0/08 '].map((c) => {
      try {
        parseCidr(c);
        return 'accepted';
      } catch (error) {
        return (error as Error).message;
      }
    });
    expect(problems).toEqual([
      'has a prefix length outside 0-32',
      'has a prefix length outside 0-128',
      'has a prefix length outside 0-32',
      'has a prefix length outside 0-32',
      'is not an address or CIDR range',
      'is not an address or CIDR range',
      'is not an address or CIDR range',
      'is not an address or CIDR range',
      'is not an address or CIDR range',
      'is not an address or CIDR range',
      'is not an address or CIDR range',
      'has a prefix length outside 0-32',
      'has a prefix length outside 0-32',
    ]);
    expect(() => parseCidrList('10.0.0.0/8, nope')).toThrow('nope is not an address or CIDR range');
    expect(() => parseCidrList(' , ')).toThrow('lists no range');
  });

  it('normalising is idempotent and the range holds its own network address (any IPv4 or IPv6 address and prefix)', () => {
    const v4 = fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 })).map(([a, p]) => `${a}/${p}`);
    const v6 = fc.tuple(fc.ipV6(), fc.integer({ min: 0, max: 128 })).map(([a, p]) => `${a}/${p}`);
    fc.assert(
      fc.property(fc.oneof(v4, v6), (text) => {
        const range = parseCidr(text);
        expect(parseCidr(range.text).text).toBe(range.text);
        expect(contains(range, parseAddress(range.text.split('/')[0]!)!)).toBe(true);
        // The address given lies in the range made from it (an IPv4-mapped one as its IPv4).
        expect(contains(range, parseAddress(text.split('/')[0]!)!)).toBe(true);
      }),
    );
  });

  it('an IPv4 address and its IPv4-mapped IPv6 spelling are one address, in every range', () => {
    fc.assert(
      fc.property(fc.ipV4(), fc.ipV4(), fc.integer({ min: 0, max: 32 }), (address, network, prefix) => {
        const range = parseCidr(`${network}/${prefix}`);
        expect(contains(range, parseAddress(`::ffff:${address}`)!)).toBe(contains(range, parseAddress(address)!));
        expect(normalAddress(`::ffff:${address}`)).toBe(formatAddress(parseAddress(address)!));
      }),
    );
  });

  it('matches by prefix bits: an address is in a range exactly when the first prefix bits agree', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 4, maxLength: 4 }), fc.uint8Array({ minLength: 4, maxLength: 4 }), fc.integer({ min: 0, max: 32 }), (a, b, prefix) => {
        const toInt = (bytes: Uint8Array) => bytes.reduce((n, byte) => n * 256 + byte, 0);
        const same = (toInt(a) - (toInt(a) % 2 ** (32 - prefix))) === (toInt(b) - (toInt(b) % 2 ** (32 - prefix)));
        expect(contains(parseCidr(`${[...a].join('.')}/${prefix}`), parseAddress([...b].join('.'))!)).toBe(same);
      }),
    );
  });
});

describe('IP rules', () => {
  const rules = { allow: [{ cidr: '127.0.0.0/8' }, { cidr: '::1/128', label: 'local v6' }], deny: [{ cidr: '127.0.0.2/32', label: 'build box' }] };

  it('deny wins over allow, an empty allow list allows everything, an address outside a non-empty allow list is refused', () => {
    expect(checkAddress(rules, '127.0.0.1')).toEqual({ allowed: true });
    expect(checkAddress(rules, '::ffff:127.0.0.2')).toEqual({ allowed: false, reason: 'address 127.0.0.2 is in deny entry 127.0.0.2/32 (build box)' });
    expect(checkAddress(rules, '::1')).toEqual({ allowed: true });
    expect(checkAddress(rules, '10.0.0.1')).toEqual({ allowed: false, reason: 'address 10.0.0.1 is in no allow entry' });
    expect(checkAddress({ allow: [], deny: [{ cidr: '127.0.0.2/32' }] }, '10.0.0.1')).toEqual({ allowed: true });
    expect(checkAddress(undefined, 'garbage')).toEqual({ allowed: true });
    expect(checkAddress({ allow: [], deny: [] }, '')).toEqual({ allowed: true });
    expect(checkAddress({ allow: [], deny: [{ cidr: '10.0.0.0/8' }] }, '')).toEqual({ allowed: false, reason: 'the client address "" is not an IP address' });
  });

  it('for any address: refused exactly when a deny entry holds it, or the allow list is non-empty and none holds it', () => {
    const cidr = fc.oneof(
      fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 })).map(([a, p]) => parseCidr(`${a}/${p}`).text),
      fc.tuple(fc.ipV6(), fc.integer({ min: 0, max: 128 })).map(([a, p]) => parseCidr(`${a}/${p}`).text),
    );
    fc.assert(
      fc.property(fc.array(cidr, { maxLength: 4 }), fc.array(cidr, { maxLength: 4 }), fc.oneof(fc.ipV4(), fc.ipV6()), (allow, deny, address) => {
        const parsed = parseAddress(address)!;
        const inAny = (list: string[]) => list.some((c) => contains(parseCidr(c), parsed));
        const expected = !inAny(deny) && (allow.length === 0 || inAny(allow));
        expect(checkAddress({ allow: allow.map((c) => ({ cidr: c })), deny: deny.map((c) => ({ cidr: c })) }, address).allowed).toBe(expected);
      }),
    );
  });
});
