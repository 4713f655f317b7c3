import { beforeAll, describe, expect, it } from 'vitest';
import { loadParser } from '../../proxy/policy/parser.js';
import { allowedUnder, openPolicy } from '../support/allowed-decision.js';
import { RecentWrites } from '../../proxy/recent-writes.js';
import { placementOf } from '../../proxy/replica-routing.js';

beforeAll(loadParser);

const policy = openPolicy('pol_routing');
const allowed = (sql: string) => allowedUnder(policy, sql);

describe('read routing: where an allowed statement may run', () => {
  it.each([
    'select * from orders where id = 1',
    'select count(*) from orders join customers on customers.id = orders.id',
    'with recent as (select * from orders) select * from recent',
    'select pg_is_in_recovery()',
    'select 1; select 2',
  ])('a pure read goes to a replica: %s', (sql) => {
    expect(placementOf(sql, allowed(sql), Number.POSITIVE_INFINITY, 5_000)).toBe('replica');
  });

  it.each([
    'insert into orders values (1)',
    'update orders set total = 1',
    'delete from orders',
    'with moved as (delete from orders returning *) select * from moved',
    'select * from orders for update',
    'select * from orders for share',
    'begin',
    'commit',
    'set statement_timeout = 1000',
    "select set_config('statement_timeout', '1000', false)",
    'select 1; insert into orders values (1)',
    'create table t (id int)',
  ])('anything else goes to the primary: %s', (sql) => {
    expect(placementOf(sql, allowed(sql), Number.POSITIVE_INFINITY, 5_000)).toBe('not_a_read');
  });

  it('the primary hint, in any case and spacing, sends a read to the primary', () => {
    for (const sql of ['/* pgward:primary */ select 1', 'select 1 /*PGWARD:PRIMARY*/', 'select /*  pgward:primary  */ 1']) {
      expect(placementOf(sql, allowed(sql), Number.POSITIVE_INFINITY, 5_000)).toBe('hint');
    }
    expect(placementOf('select 1 -- pgward:primary', allowed('select 1 -- pgward:primary'), Number.POSITIVE_INFINITY, 5_000)).toBe('replica');
  });

  it('a read within the read-your-writes window goes to the primary, after it to a replica', () => {
    const read = allowed('select 1');
    expect(placementOf('select 1', read, 4_999, 5_000)).toBe('read_your_writes');
    expect(placementOf('select 1', read, 5_000, 5_000)).toBe('replica');
  });
});

describe('recent writes: the read-your-writes window of each credential', () => {
  it('counts from each credential’s last write, and forgets closed windows once many credentials wrote', () => {
    let now = 1_000;
    const writes = new RecentWrites(5_000, () => now);
    expect(writes.msSince('cred_a')).toBe(Number.POSITIVE_INFINITY);
    writes.wrote('cred_a');
    now += 3_000;
    expect(writes.msSince('cred_a')).toBe(3_000);
    expect(writes.msSince('cred_b')).toBe(Number.POSITIVE_INFINITY);
    writes.wrote('cred_a');
    expect(writes.msSince('cred_a')).toBe(0);
    for (let index = 0; index < 1_100; index++) writes.wrote(`cred_${index}`);
    now += 5_000;
    writes.wrote('cred_new');
    // The sweep dropped the windows that had closed: a closed window reads as no write.
    expect(writes.msSince('cred_a')).toBe(Number.POSITIVE_INFINITY);
    expect(writes.msSince('cred_new')).toBe(0);
  });
});
