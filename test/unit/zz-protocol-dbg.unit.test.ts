import { FrontendFramer } from '/work/main/proxy/protocol/frontend.js';
import { it } from 'vitest';
function sp(code: number, body: number[] | Buffer = []) { const rest = Buffer.from(body); const h = Buffer.alloc(8); h.writeInt32BE(8 + rest.length, 0); h.writeInt32BE(code, 4); return Buffer.concat([h, rest]); }
it('x', () => {
  const cases: [string, Buffer][] = [
    ['unknown', sp((1234 << 16) | 5680)], ['p2', sp(2 << 16, [0])], ['lt8', Buffer.from([0,0,0,7,0,3,0,0])], ['neg', Buffer.from([0xff,0xff,0xff,0xff])],
  ];
  for (const [name, p] of cases) { const f = new FrontendFramer(); f.push(p); try { console.log(name, f.next()); } catch (e) { console.log(name, 'threw', (e as Error).message); } }
});
