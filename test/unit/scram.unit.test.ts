import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  createScramVerifier,
  mockVerifier,
  parseClientFirst,
  saslprep,
  ScramError,
  serverFirst,
  verifyClientFinal,
  type ClientFinalResult,
  type ScramErrorCode,
} from '../../src/crypto/scram.js';
import { ScramVerifier } from '../../src/events/fields.js';

/** node-postgres's SCRAM client (pg/lib/crypto/sasl.js): the peer, so the server is not checked against itself. */
interface PgScramClient {
  response: string;
}
interface PgSasl {
  startSession(mechanisms: string[], stream?: object): PgScramClient;
  continueSession(session: PgScramClient, password: string, serverData: string, stream?: object): Promise<void>;
  finalizeSession(session: PgScramClient, serverData: string): void;
}
const sasl = createRequire(import.meta.url)('pg/lib/crypto/sasl.js') as PgSasl;

/**
 * A full exchange between pg's client, which knows `password`, and the server functions holding
 * `verifier`; `tamper` may rewrite the client-final message. A successful server final is checked by
 * the client, which throws if the server signature is wrong.
 */
async function exchange(password: string, verifier: ScramVerifier, tamper: (clientFinal: string) => string = (m) => m, stream?: object): Promise<ClientFinalResult> {
  const client = sasl.startSession(['SCRAM-SHA-256'], stream);
  const { message, session } = serverFirst(parseClientFirst(client.response), verifier);
  await sasl.continueSession(client, password, message, stream);
  const result = verifyClientFinal(session, tamper(client.response));
  if (result.ok) sasl.finalizeSession(client, result.serverFinal);
  return result;
}

function refusal(result: ClientFinalResult): ScramErrorCode {
  if (result.ok) throw new Error('expected the exchange to fail');
  expect(result.error).toBeInstanceOf(ScramError);
  return result.error.code;
}

function parseError(message: string): ScramError {
  try {
    parseClientFirst(message);
  } catch (error) {
    expect(error).toBeInstanceOf(ScramError);
    return error as ScramError;
  }
  throw new Error(`expected ${JSON.stringify(message)} to be refused`);
}

/** Characters on each SASLprep path: mapped to a space or to nothing, changed by NFKC, left alone. */
const prepared = ['\u00a0', '\u2003', '\u3000', '\u00ad', '\u200b', '\ufeff', '\ufb01', '\u2168', '\uff21', 'e\u0301', '\u212b', '\u00df', '\u00b2', '\u6f22', '\u03a9'];
/** Characters PostgreSQL's SASLprep refuses: bidirectional, prohibited, unassigned in Unicode 3.2. */
const refused = ['\u05d0', '\u0627', '\u0080', '\u0340', '\u2028', '\ue000', '\u0221', '\u{1f600}'];

describe('SCRAM-SHA-256 verifiers', () => {
  it('match PostgreSQL defaults and the event schema', () => {
    const verifier = createScramVerifier('correct horse battery staple');
    expect(ScramVerifier.parse(verifier)).toEqual(verifier);
    expect(verifier.iterations).toBe(4096);
    expect(Buffer.from(verifier.salt, 'base64')).toHaveLength(16);
    expect(createScramVerifier('correct horse battery staple').salt).not.toBe(verifier.salt);
    expect(createScramVerifier('x', { iterations: 10_000 }).iterations).toBe(10_000);
  });

  it('refuses parameters the schema would refuse', () => {
    expect(() => createScramVerifier('x', { iterations: 4095 })).toThrow(RangeError);
    expect(() => createScramVerifier('x', { iterations: 4096.5 })).toThrow(RangeError);
    expect(() => createScramVerifier('x', { salt: randomBytes(15) })).toThrow(RangeError);
    expect(() => createScramVerifier('x', { salt: randomBytes(65) })).toThrow(RangeError);
  });
});

describe('SASLprep as PostgreSQL applies it', () => {
  it('follows the RFC 4013 examples, except that ASCII is never changed', () => {
    expect(saslprep('I\u00adX')).toBe('IX');
    expect(saslprep('user')).toBe('user');
    expect(saslprep('USER')).toBe('USER');
    expect(saslprep('\u00aa')).toBe('a');
    expect(saslprep('\u2168')).toBe('IX');
    expect(saslprep('\u0627\u0031')).toBeNull();
    // RFC 4013 prohibits U+0007; PostgreSQL returns any all-ASCII string unchanged.
    expect(saslprep('\u0007')).toBe('\u0007');
  });

  it('maps spaces and soft characters, then normalizes with NFKC', () => {
    expect(saslprep('a\u00a0b\u3000c')).toBe('a b c');
    expect(saslprep('\ufb01x\u200d')).toBe('fix');
    expect(saslprep('\u05d0\u05d1')).toBe('\u05d0\u05d1');
  });

  it('fails where PostgreSQL falls back to the raw password', () => {
    expect(saslprep('\u00ad\ufeff')).toBeNull();
    expect(saslprep('caf\u00e9\u0080')).toBeNull();
    expect(saslprep('\u0221')).toBeNull();
    expect(saslprep('\u05d0a\u05d1')).toBeNull();
    expect(saslprep('\u05d0\u05d11')).toBeNull();
    expect(saslprep('\ud800x\u00e9')).toBeNull();
    // Checked before normalization, as PostgreSQL does: U+0340 is prohibited though its NFKC form U+0300 is not.
    expect(saslprep('a\u0340')).toBeNull();
  });
});

describe('the SCRAM exchange', () => {
  it('reproduces the RFC 7677 test vector', () => {
    const verifier = createScramVerifier('pencil', { iterations: 4096, salt: Buffer.from('W22ZaJ0SNY7soEsUEjb6gQ==', 'base64') });
    const clientFirst = parseClientFirst('n,,n=user,r=rOprNGfwEbeRWgbNEkqO');
    const { message, session } = serverFirst(clientFirst, verifier, '%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0');
    expect(message).toBe('r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096');
    expect(verifyClientFinal(session, 'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=')).toEqual({
      ok: true,
      serverFinal: 'v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=',
    });
  });

  it("authenticates node-postgres's client, which verifies the server signature", async () => {
    const verifier = createScramVerifier('s3cret-pa55');
    expect((await exchange('s3cret-pa55', verifier)).ok).toBe(true);
    expect((await exchange('s3cret-pa55', verifier, undefined, {})).ok).toBe(true);
  });

  it('sends a fresh base64 server nonce after the client nonce', () => {
    const clientFirst = parseClientFirst('n,,n=*,r=abc');
    const verifier = createScramVerifier('x');
    const first = serverFirst(clientFirst, verifier).session.nonce;
    expect(first).toMatch(/^abc[A-Za-z0-9+/]{24}$/);
    expect(serverFirst(clientFirst, verifier).session.nonce).not.toBe(first);
    expect(() => serverFirst(clientFirst, verifier, 'a,b')).toThrow(RangeError);
  });

  it('refuses a wrong password', async () => {
    expect(refusal(await exchange('wrong', createScramVerifier('right')))).toBe('PROOF_MISMATCH');
  });

  it('looks the same for an unknown user: a stable salt per user, and the proof never matches', async () => {
    const secret = randomBytes(32);
    const mock = mockVerifier('nobody', secret);
    expect(ScramVerifier.parse(mock)).toEqual(mock);
    expect(mockVerifier('nobody', secret).salt).toBe(mock.salt);
    expect(mockVerifier('somebody', secret).salt).not.toBe(mock.salt);
    expect(mockVerifier('nobody', randomBytes(32)).salt).not.toBe(mock.salt);
    expect(refusal(await exchange('any password', mock))).toBe('PROOF_MISMATCH');
    expect(() => mockVerifier('nobody', randomBytes(16))).toThrow(RangeError);
  });

  it('refuses channel binding, which pg requests as SCRAM-SHA-256-PLUS', () => {
    const stream = { getPeerCertificate: () => ({ raw: Buffer.alloc(0) }) };
    const client = sasl.startSession(['SCRAM-SHA-256-PLUS', 'SCRAM-SHA-256'], stream);
    expect(client.response.startsWith('p=tls-server-end-point,,')).toBe(true);
    expect(parseError(client.response).code).toBe('CHANNEL_BINDING_UNSUPPORTED');
  });

  it.each([
    ['', 'MALFORMED'],
    ['x,,n=,r=abc', 'MALFORMED'],
    ['n', 'MALFORMED'],
    ['n,', 'MALFORMED'],
    ['n,a=admin,n=,r=abc', 'MALFORMED'],
    ['n,,r=abc', 'MALFORMED'],
    ['n,,n=user', 'MALFORMED'],
    ['n,,n=user,r=', 'MALFORMED'],
    ['n,,n=user,r=ab\u0001c', 'MALFORMED'],
    ['n,,n=user,r=a c', 'MALFORMED'],
    ['n,,n=user,r=abc,1=x', 'MALFORMED'],
    ['n,,n=user,r=abc,', 'MALFORMED'],
    ['n,,m=ext,n=user,r=abc', 'EXTENSION_UNSUPPORTED'],
    ['p=tls-unique,,n=user,r=abc', 'CHANNEL_BINDING_UNSUPPORTED'],
  ] as const)('refuses the client-first message %j with %s', (message, code) => {
    expect(parseError(message).code).toBe(code);
  });

  it('ignores the user name and optional extensions, as PostgreSQL does', () => {
    expect(parseClientFirst('y,,n=someone else,r=abc,x=ignored')).toEqual({ gs2Header: 'y,,', bare: 'n=someone else,r=abc,x=ignored', nonce: 'abc' });
  });

  it('refuses a tampered nonce', async () => {
    const verifier = createScramVerifier('pw');
    const replaceNonce = (change: (nonce: string) => string) => (final: string) => final.replace(/,r=([^,]*)/, (_m, nonce: string) => `,r=${change(nonce)}`);
    expect(refusal(await exchange('pw', verifier, replaceNonce((nonce) => `${nonce.slice(0, -1)}${nonce.endsWith('A') ? 'B' : 'A'}`)))).toBe('NONCE_MISMATCH');
    expect(refusal(await exchange('pw', verifier, replaceNonce((nonce) => nonce.slice(0, 24))))).toBe('NONCE_MISMATCH');
    expect(refusal(await exchange('pw', verifier, replaceNonce((nonce) => `${nonce}x`)))).toBe('NONCE_MISMATCH');
  });

  it('refuses a channel binding that does not repeat the gs2 header', async () => {
    const verifier = createScramVerifier('pw');
    expect(refusal(await exchange('pw', verifier, (final) => final.replace('c=biws', 'c=eSws')))).toBe('MALFORMED');
    expect(refusal(await exchange('pw', verifier, (final) => final.replace('c=eSws', 'c=biws'), {}))).toBe('MALFORMED');
  });

  it('refuses malformed client-final messages', async () => {
    const verifier = createScramVerifier('pw');
    const rewrites: ((final: string) => string)[] = [
      (final) => final.replace(/,p=.*$/, ''),
      (final) => `${final},x=1`,
      (final) => final.replace(/p=(.*)$/, 'p=$1,p=$1'),
      (final) => final.replace(/p=(.*)$/, (_m, proof: string) => `p=${Buffer.from(proof, 'base64').subarray(1).toString('base64')}`),
      (final) => final.replace(/=$/, ''),
      (final) => final.replace('c=biws,', ''),
      (final) => final.replace(/^c=biws,(r=[^,]*),/, '$1,c=biws,'),
      (final) => final.replace(',', ',,'),
    ];
    for (const rewrite of rewrites) expect(refusal(await exchange('pw', verifier, rewrite))).toBe('MALFORMED');
    // An extension is well-formed, and ignored, but the proof covers it.
    expect(refusal(await exchange('pw', verifier, (final) => final.replace(',p=', ',x=ignored,p=')))).toBe('PROOF_MISMATCH');
  });

  it('authenticates any password PostgreSQL can prepare, and no proof with one bit flipped', async () => {
    const unit = fc.oneof(fc.constantFrom(...prepared), fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }));
    const password = fc.string({ unit, minLength: 1, maxLength: 24 }).filter((candidate) => saslprep(candidate) !== null);
    await fc.assert(
      fc.asyncProperty(password, fc.nat(255), async (candidate, bit) => {
        const verifier = createScramVerifier(candidate);
        expect((await exchange(candidate, verifier)).ok).toBe(true);
        const flipBit = (final: string) =>
          final.replace(/p=(.*)$/, (_m, proof: string) => {
            const bytes = Buffer.from(proof, 'base64');
            bytes[bit >> 3]! ^= 1 << (bit & 7);
            return `p=${bytes.toString('base64')}`;
          });
        expect(refusal(await exchange(candidate, verifier, flipBit))).toBe('PROOF_MISMATCH');
      }),
      { numRuns: 60 },
    );
  });
});

describe("PostgreSQL's own verifiers", () => {
  let admin: pg.Client;

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: inject('pgUrl') });
    await admin.connect();
    await admin.query("set password_encryption = 'scram-sha-256'");
  });

  afterAll(async () => {
    await admin.end();
  });

  /** The verifier PostgreSQL stores for a role created with `password`, as `SCRAM-SHA-256$<i>:<salt>$<StoredKey>:<ServerKey>`. */
  async function postgresVerifier(password: string): Promise<ScramVerifier> {
    const role = `pgward_t_scram_${randomBytes(6).toString('hex')}`;
    await admin.query(`create role ${pg.escapeIdentifier(role)} password ${pg.escapeLiteral(password)}`);
    try {
      const { rows } = await admin.query<{ rolpassword: string }>('select rolpassword from pg_authid where rolname = $1', [role]);
      const match = /^SCRAM-SHA-256\$(\d+):([^$]+)\$([^:]+):(.+)$/.exec(rows[0]!.rolpassword);
      if (!match) throw new Error('PostgreSQL did not store a SCRAM-SHA-256 verifier');
      return { iterations: Number(match[1]), salt: match[2]!, stored_key: match[3]!, server_key: match[4]! };
    } finally {
      await admin.query(`drop role ${pg.escapeIdentifier(role)}`);
    }
  }

  async function expectSameVerifier(password: string): Promise<void> {
    const theirs = await postgresVerifier(password);
    expect(createScramVerifier(password, { iterations: theirs.iterations, salt: Buffer.from(theirs.salt, 'base64') }), JSON.stringify(password)).toEqual(theirs);
  }

  it('derives the StoredKey and ServerKey PostgreSQL stores', async () => {
    await expectSameVerifier('correct horse battery staple');
    await expectSameVerifier(`quote ' backslash \\ comma , equals =`);
  });

  it('prepares passwords as PostgreSQL does, falling back to the raw password where it does', async () => {
    // After U+FB01, which NFKC changes, the verifier shows whether PostgreSQL prepared the password or fell back.
    const fallbacks = refused.map((char) => `\ufb01${char}`);
    for (const password of [...prepared, ...refused, ...fallbacks, 'I\u00adX', '\u00ad', '\u0007', 'a\u0340', '\u05d0\u05d1', '\u05d0\u05d11', '\u05d0a\u05d1', '\ufb01\u0080']) {
      await expectSameVerifier(password);
    }
  });

  it('agrees with PostgreSQL on any password', async () => {
    const unit = fc.oneof(fc.constantFrom(...prepared, ...refused), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }));
    // PostgreSQL cannot hold NUL in text, and stores a password that looks like a hash as it is.
    const password = fc.string({ unit, minLength: 1, maxLength: 12 }).filter((candidate) => !candidate.includes('\0') && !/^(md5|SCRAM-SHA-256\$)/.test(candidate));
    await fc.assert(fc.asyncProperty(password, expectSameVerifier), { numRuns: 150 });
  });
});
