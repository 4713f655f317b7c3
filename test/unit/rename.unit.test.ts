import fc from 'fast-check';
import { serialize } from 'pg-protocol';
import { describe, expect, it } from 'vitest';
import { decodeFrontendMessage, FrontendFramer, type FrontendMessage } from '../../proxy/protocol/frontend.js';
import { renameBindStatement, renameParse, renameTarget } from '../../proxy/protocol/rename.js';

const startup = serialize.startup({ user: 'u', database: 'd' });

function decode(raw: Buffer): FrontendMessage {
  const framer = new FrontendFramer();
  framer.push(startup);
  framer.push(raw);
  framer.next();
  const frame = framer.next();
  if (!frame || frame.kind !== 'Message') throw new Error('no message');
  return decodeFrontendMessage(frame);
}

const name = fc.string({ maxLength: 40 }).filter((s) => !s.includes('\0'));

describe('statement renaming', () => {
  it('renames Parse, Bind, Describe and Close and keeps every other field (property)', () => {
    fc.assert(
      fc.property(name, name, fc.string({ maxLength: 200 }).filter((s) => !s.includes('\0')), (from, to, sql) => {
        const parse = decode(renameParse(serialize.parse({ name: from, text: sql, types: [23, 25] }), to));
        expect(parse).toMatchObject({ kind: 'Parse', name: to, sql, paramTypes: [23, 25] });
        const bind = decode(renameBindStatement(serialize.bind({ portal: 'p1', statement: from, values: ['a', null, 'ccc'] }), to));
        expect(bind).toMatchObject({ kind: 'Bind', portal: 'p1', statement: to });
        expect((bind as unknown as { params: (Buffer | null)[] }).params.map((p) => p?.toString() ?? null)).toEqual(['a', null, 'ccc']);
        expect(decode(renameTarget(serialize.describe({ type: 'S', name: from }), to))).toMatchObject({ kind: 'Describe', target: 'S', name: to });
        expect(decode(renameTarget(serialize.close({ type: 'S', name: from }), to))).toMatchObject({ kind: 'Close', target: 'S', name: to });
      }),
    );
  });
});
