import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyringError, loadOrCreateKeyringFile, openSecret, parseKeyring, sealSecret, SealError, type Keyring, type SealErrorCode } from '../../src/crypto/seal.js';
import { SealedSecret } from '../../src/events/fields.js';

const aad = 'db_01jq3v5m8k2r7t9w4x6y0z1a2b';

function keyring(current: string, ...ids: string[]): Keyring {
  return { current, keys: new Map([current, ...ids].map((id) => [id, randomBytes(32)])) };
}

function sealError(open: () => unknown): SealErrorCode {
  try {
    open();
  } catch (error) {
    expect(error).toBeInstanceOf(SealError);
    return (error as SealError).code;
  }
  throw new Error('expected a SealError');
}

function keyringError(spec: string): KeyringError {
  try {
    parseKeyring(spec);
  } catch (error) {
    expect(error).toBeInstanceOf(KeyringError);
    return error as KeyringError;
  }
  throw new Error('expected a KeyringError');
}

/** `sealed` with bit `bit` of the decoded `field` flipped. */
function flip(sealed: SealedSecret, field: 'iv' | 'ciphertext' | 'tag', bit: number): SealedSecret {
  const bytes = Buffer.from(sealed[field], 'base64');
  bytes[(bit >> 3) % bytes.length]! ^= 1 << (bit & 7);
  return { ...sealed, [field]: bytes.toString('base64') };
}

describe('sealing secrets with AES-256-GCM', () => {
  it('round-trips any secret, with a fresh IV each time, in the event schema', () => {
    const ring = keyring('k1');
    fc.assert(
      fc.property(fc.string({ unit: 'binary', minLength: 1, maxLength: 1024 }), (secret) => {
        const sealed = sealSecret(secret, ring, aad);
        expect(SealedSecret.parse(sealed)).toEqual(sealed);
        expect(sealed.key_id).toBe('k1');
        expect(openSecret(sealed, ring, aad)).toBe(secret);
      }),
    );
    expect(sealSecret('hunter2', ring, aad).iv).not.toBe(sealSecret('hunter2', ring, aad).iv);
  });

  it('binds the record: another aad does not open', () => {
    const ring = keyring('k1');
    expect(sealError(() => openSecret(sealSecret('hunter2', ring, aad), ring, 'db_01jq3v5m8k2r7t9w4x6y0z1a2c'))).toBe('TAMPERED');
  });

  it('detects any flipped bit in the IV, ciphertext or tag', () => {
    const ring = keyring('k1');
    const sealed = sealSecret('hunter2', ring, aad);
    fc.assert(
      fc.property(fc.constantFrom('iv', 'ciphertext', 'tag' as const), fc.nat(127), (field, bit) => {
        expect(sealError(() => openSecret(flip(sealed, field, bit), ring, aad))).toBe('TAMPERED');
      }),
    );
  });

  it('refuses a shortened tag or IV and another algorithm', () => {
    const ring = keyring('k1');
    const sealed = sealSecret('hunter2', ring, aad);
    const shortened = (text: string) => Buffer.from(text, 'base64').subarray(0, 8).toString('base64');
    expect(sealError(() => openSecret({ ...sealed, tag: shortened(sealed.tag) }, ring, aad))).toBe('TAMPERED');
    expect(sealError(() => openSecret({ ...sealed, iv: shortened(sealed.iv) }, ring, aad))).toBe('TAMPERED');
    expect(sealError(() => openSecret({ ...sealed, alg: 'AES-128-GCM' as 'AES-256-GCM' }, ring, aad))).toBe('TAMPERED');
  });

  it('names an unknown key, and reveals nothing of the secret', () => {
    const sealed = sealSecret('hunter2', keyring('k1'), aad);
    expect(sealError(() => openSecret(sealed, keyring('k2'), aad))).toBe('UNKNOWN_KEY');
    expect(sealError(() => openSecret(sealed, { current: 'k1', keys: new Map([['k1', randomBytes(32)]]) }, aad))).toBe('TAMPERED');
    expect(sealError(() => sealSecret('hunter2', { current: 'k3', keys: new Map() }, aad))).toBe('UNKNOWN_KEY');
    expect(() => openSecret(flip(sealed, 'tag', 0), keyring('k1'), aad)).toThrow(/^the sealed secret does not authenticate$/);
  });

  it('opens secrets sealed under a rotated-out key and seals under the new current one', () => {
    const old = keyring('k1');
    const rotated: Keyring = { current: 'k2', keys: new Map([['k2', randomBytes(32)], ['k1', old.keys.get('k1')!]]) };
    const sealedBefore = sealSecret('before', old, aad);
    const sealedAfter = sealSecret('after', rotated, aad);
    expect(sealedAfter.key_id).toBe('k2');
    expect(openSecret(sealedBefore, rotated, aad)).toBe('before');
    expect(openSecret(sealedAfter, rotated, aad)).toBe('after');
    expect(sealError(() => openSecret(sealedAfter, old, aad))).toBe('UNKNOWN_KEY');
  });

  it('refuses an empty, oversized or ill-formed secret', () => {
    const ring = keyring('k1');
    expect(() => sealSecret('', ring, aad)).toThrow(RangeError);
    expect(() => sealSecret('x'.repeat(4097), ring, aad)).toThrow(RangeError);
    expect(SealedSecret.parse(sealSecret('\u{1f511}'.repeat(1024), ring, aad)).key_id).toBe('k1');
    expect(() => sealSecret('a\ud800b', ring, aad)).toThrow(RangeError);
  });
});

describe('keyring specifications', () => {
  const keyA = randomBytes(32).toString('base64');
  const keyB = randomBytes(32).toString('base64');

  it('reads one key as k1', () => {
    const ring = parseKeyring(` ${keyA}\n`);
    expect(ring.current).toBe('k1');
    expect([...ring.keys]).toEqual([['k1', Buffer.from(keyA, 'base64')]]);
  });

  it('reads kid:key entries, the first current; a key id may hold a colon', () => {
    const ring = parseKeyring(`seal:2025:${keyB}, k1:${keyA}`);
    expect(ring.current).toBe('seal:2025');
    expect(ring.keys.get('seal:2025')).toEqual(Buffer.from(keyB, 'base64'));
    expect(ring.keys.get('k1')).toEqual(Buffer.from(keyA, 'base64'));
  });

  it.each([
    ['an empty string', '', 'the keyring is empty'],
    ['a truncated key', keyA.slice(0, -4), 'the key is not base64 of 32 bytes'],
    ['a 16-byte key', randomBytes(16).toString('base64'), 'the key is not base64 of 32 bytes'],
    ['two keys without ids', `${keyA},${keyB}`, 'entry 1: expected kid:base64key'],
    ['a trailing comma', `k1:${keyA},`, 'entry 2: expected kid:base64key'],
    ['a key id with a space', `k1:${keyA},k 2:${keyB}`, 'entry 2: the key id must match'],
    ['an empty key id', `:${keyA}`, 'entry 1: the key id must match'],
    ['a repeated key id', `k1:${keyA},k1:${keyB}`, 'entry 2: the key id is already used by an earlier entry'],
    ['unpadded base64', `k1:${keyA},k2:${keyB.replace(/=$/, '')}`, 'entry 2: the key is not base64 of 32 bytes'],
    ['base64url', `k1:${keyA},k2:${Buffer.from(keyB, 'base64').toString('base64url')}`, 'entry 2: the key is not base64 of 32 bytes'],
  ])('refuses %s', (_label, spec, message) => {
    expect(keyringError(spec).message).toContain(message);
  });

  it('never quotes key material in an error', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.constant(keyA), fc.string({ unit: 'binary-ascii', maxLength: 50 })), { minLength: 1, maxLength: 4 }), fc.string({ maxLength: 3 }), (parts, joiner) => {
        const spec = parts.join(joiner);
        let message = '';
        try {
          parseKeyring(spec);
        } catch (error) {
          message = (error as Error).message;
        }
        expect(message).not.toContain(keyA.slice(0, 8));
        for (const part of spec.split(/[,:]/).filter((p) => p.trim().length >= 6)) expect(message).not.toContain(part.trim());
      }),
    );
  });
});

describe('the keyring file', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'pgward-seal-'));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('is created with one random key, readable by its owner only, and read back the next time', async () => {
    const path = join(dir, 'created', 'master.key');
    const ring = await loadOrCreateKeyringFile(path);
    expect(ring.current).toBe('k1');
    expect(ring.keys.get('k1')).toHaveLength(32);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(await readFile(path, 'utf8')).toBe(`k1:${ring.keys.get('k1')!.toString('base64')}\n`);
    expect(await loadOrCreateKeyringFile(path)).toEqual(ring);
    expect(await readdir(join(dir, 'created'))).toEqual(['master.key']);
  });

  it('yields one keyring to callers that start together', async () => {
    const path = join(dir, 'raced.key');
    const rings = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateKeyringFile(path)));
    for (const ring of rings) expect(ring).toEqual(rings[0]);
    expect(parseKeyring(await readFile(path, 'utf8'))).toEqual(rings[0]);
    expect(await readdir(dir)).not.toContainEqual(expect.stringMatching(/\.tmp$/));
  });

  it('uses an existing keyring, and names the file, not its content, when it is unusable', async () => {
    const keyA = randomBytes(32).toString('base64');
    const given = join(dir, 'given.key');
    await writeFile(given, `k7:${keyA}\n`, { mode: 0o600 });
    expect((await loadOrCreateKeyringFile(given)).current).toBe('k7');
    const broken = join(dir, 'broken.key');
    await writeFile(broken, keyA.slice(0, 40), { mode: 0o600 });
    const error = await loadOrCreateKeyringFile(broken).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(KeyringError);
    expect((error as Error).message).toBe(`${broken}: the key is not base64 of 32 bytes`);
  });
});
