import { mkdtemp, rm } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeAnswer, decodeHello, encodeFrame, exporterOf, FRAME, HandshakeError, makeHello, MAX_FRAME_BYTES, proofHolds, takeFrame, type HelloFields } from '../../proxy/relay/handshake.js';
import { loadTls } from '../../proxy/tls.js';

const secret = Buffer.alloc(32, 7);
const previous = Buffer.alloc(32, 9);
const fields: HelloFields = {
  origin_region: 'a',
  origin_proxy_id: 'proxy-a',
  region: 'b',
  target: { project_id: 'prj_1', database_id: 'db_1', read_only: true, role: '', branch: '' },
};

const PROOF_BEFORE_READS = '6Tdxv0yE5tuHVew+Ezi4sB3dJkVL8BhgzPPctv/LfHU=';

/** Both ends' exporter values of real TLS 1.3 sessions to one listener. */
let dir: string;
let server: net.Server;
let context: tls.SecureContext;
const sessions: { client: Buffer; server: Buffer }[] = [];

async function session(): Promise<{ client: Buffer; server: Buffer }> {
  const accepted = new Promise<Buffer>((resolve) =>
    server.once('connection', (raw: net.Socket) => {
      const socket = new tls.TLSSocket(raw, { isServer: true, secureContext: context });
      socket.on('error', () => undefined);
      socket.once('secure', () => resolve(exporterOf(socket)));
    }),
  );
  const port = (server.address() as AddressInfo).port;
  const client = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, minVersion: 'TLSv1.3' });
  await new Promise((resolve) => client.once('secureConnect', resolve));
  const pair = { client: exporterOf(client), server: await accepted };
  client.destroy();
  return pair;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pgward-relay-unit-'));
  context = await loadTls({ dataDir: dir, hosts: ['127.0.0.1'] });
  server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  sessions.push(await session(), await session());
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

describe('the relay hello', () => {
  it('is proven by the secret for the TLS session both ends share', () => {
    const [one] = sessions;
    expect(one!.client.equals(one!.server)).toBe(true);
    const hello = decodeHello(JSON.parse(JSON.stringify(makeHello(fields, secret, one!.client))));
    expect(hello).toBeDefined();
    expect(proofHolds(hello!, [secret], one!.server)).toBe(true);
    // During a rotation the peer accepts the previous secret too, in either place.
    expect(proofHolds(hello!, [previous, secret], one!.server)).toBe(true);
  });

  it('fails on another TLS session: a recorded hello cannot be replayed', () => {
    const [one, two] = sessions;
    expect(one!.server.equals(two!.server)).toBe(false);
    const hello = makeHello(fields, secret, one!.client);
    expect(proofHolds(hello, [secret], two!.server)).toBe(false);
  });

  it('fails with another secret, or with any signed field changed', () => {
    const [one] = sessions;
    const hello = makeHello(fields, secret, one!.client);
    expect(proofHolds(hello, [previous], one!.server)).toBe(false);
    expect(proofHolds({ ...hello, origin_region: 'c' }, [secret], one!.server)).toBe(false);
    expect(proofHolds({ ...hello, target: { ...fields.target!, read_only: false } }, [secret], one!.server)).toBe(false);
    expect(proofHolds({ ...hello, target: { ...fields.target!, role: 'pgw_admin' } }, [secret], one!.server)).toBe(false);
    expect(proofHolds({ ...hello, target: { ...fields.target!, database_id: 'db_2' } }, [secret], one!.server)).toBe(false);
    expect(proofHolds({ ...hello, nonce: Buffer.alloc(16, 1).toString('base64') }, [secret], one!.server)).toBe(false);
    expect(proofHolds({ ...hello, proof: '' }, [secret], one!.server)).toBe(false);
    // A read link's `reads` is signed: a man in the middle can neither add nor strip it.
    expect(proofHolds({ ...hello, target: { ...fields.target!, reads: true } }, [secret], one!.server)).toBe(false);
    const reads = makeHello({ ...fields, target: { ...fields.target!, reads: true } }, secret, one!.client);
    expect(proofHolds(reads, [secret], one!.server)).toBe(true);
    expect(proofHolds({ ...reads, target: fields.target! }, [secret], one!.server)).toBe(false);
  });

  it('signs a hello without `reads` as before the field existed, and takes `reads` only as true', () => {
    const nonce = Buffer.alloc(16, 3);
    // The proof of this hello made by the code before `reads` (commit d8e273f).
    expect(makeHello(fields, secret, Buffer.alloc(32, 5), nonce).proof).toBe(PROOF_BEFORE_READS);
    const hello = makeHello(fields, secret, Buffer.alloc(32));
    expect(decodeHello({ ...hello, target: { ...fields.target!, reads: true } })?.target?.reads).toBe(true);
    expect(decodeHello({ ...hello, target: { ...fields.target!, reads: false } })).toBeUndefined();
  });

  it('is malformed with neither or both of target and cancel, or a short nonce', () => {
    const hello = makeHello(fields, secret, Buffer.alloc(32));
    expect(decodeHello({ ...hello, target: undefined })).toBeUndefined();
    expect(decodeHello({ ...hello, cancel: { process_id: 1, secret_key: 'AAAAAA==' } })).toBeUndefined();
    expect(decodeHello({ ...hello, nonce: 'AAAA' })).toBeUndefined();
    expect(decodeHello({ ...hello, extra: 1 })).toBeUndefined();
  });
});

describe('handshake frames', () => {
  it('are read whole, whatever the chunks, with what follows them', () => {
    const frame = encodeFrame(FRAME.ready, { region: 'b', parameters: { server_version: '15.4' }, process_id: 42, secret_key: 'AQIDBA==' });
    expect(takeFrame(frame.subarray(0, 7))).toBeUndefined();
    const taken = takeFrame(Buffer.concat([frame, Buffer.from('Q')]))!;
    expect(taken.rest.toString()).toBe('Q');
    expect(decodeAnswer(taken.frame)).toEqual({ ready: { region: 'b', parameters: { server_version: '15.4' }, process_id: 42, secret_key: 'AQIDBA==' } });
    expect(decodeAnswer(takeFrame(encodeFrame(FRAME.refused, { reason: 'bad_proof' }))!.frame)).toEqual({ refused: { reason: 'bad_proof' } });
    const onReplica = { region: 'b', parameters: {}, process_id: 42, secret_key: 'AQIDBA==', replica_id: 'rep_1' };
    expect(decodeAnswer(takeFrame(encodeFrame(FRAME.ready, onReplica))!.frame)).toEqual({ ready: onReplica });
    expect(decodeAnswer(takeFrame(encodeFrame(FRAME.refused, { reason: 'whatever' }))!.frame)).toBeUndefined();
  });

  it('refuse a length out of bounds or a body that is not JSON', () => {
    const huge = Buffer.alloc(5);
    huge.write('H');
    huge.writeUInt32BE(MAX_FRAME_BYTES + 1, 1);
    expect(() => takeFrame(huge)).toThrow(HandshakeError);
    const notJson = Buffer.concat([Buffer.from('H'), Buffer.from([0, 0, 0, 7]), Buffer.from('{x}')]);
    expect(() => takeFrame(notJson)).toThrow('not JSON');
  });
});
