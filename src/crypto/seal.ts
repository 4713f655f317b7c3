/**
 * AES-256-GCM sealing of secrets pgward must be able to read back (upstream database passwords),
 * under a keyring whose current key seals and whose every key opens.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { link, mkdir, open, readFile, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { KeyId, type SealedSecret } from '../events/fields.js';

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const MAX_PLAINTEXT_BYTES = 4096;

export interface Keyring {
  /** The key id new seals use. */
  readonly current: string;
  /** Every key that can open, by id; 32 bytes each. */
  readonly keys: ReadonlyMap<string, Buffer>;
}

export type SealErrorCode = 'UNKNOWN_KEY' | 'TAMPERED';

export class SealError extends Error {
  override readonly name = 'SealError';
  constructor(
    readonly code: SealErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** A keyring specification that cannot be used; the message never quotes the specification. */
export class KeyringError extends Error {
  override readonly name = 'KeyringError';
}

function keyFor(keyring: Keyring, keyId: string): Buffer {
  const key = keyring.keys.get(keyId);
  if (!key) throw new SealError('UNKNOWN_KEY', `the keyring has no key ${keyId}`);
  return key;
}

/** Decodes canonical base64 of exactly `length` bytes, or returns undefined. */
function decodeBase64(text: string, length: number): Buffer | undefined {
  const bytes = Buffer.from(text, 'base64');
  return bytes.length === length && bytes.toString('base64') === text ? bytes : undefined;
}

/** Seals `plaintext` under the current key; `aad` (e.g. the database id) must be given again to open it. */
export function sealSecret(plaintext: string, keyring: Keyring, aad: string): SealedSecret {
  const length = Buffer.byteLength(plaintext, 'utf8');
  if (length < 1 || length > MAX_PLAINTEXT_BYTES) throw new RangeError(`the secret must be 1 to ${MAX_PLAINTEXT_BYTES} bytes`);
  return sealBlob(plaintext, keyring, aad);
}

/** Seals text of any length (such as a stored response that carries a secret shown once); open it with openSecret. */
export function sealBlob(plaintext: string, keyring: Keyring, aad: string): SealedSecret {
  const data = Buffer.from(plaintext, 'utf8');
  if (data.toString('utf8') !== plaintext) throw new RangeError('the secret must be well-formed Unicode');
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', keyFor(keyring, keyring.current), iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(data), cipher.final()]);
  return {
    alg: 'AES-256-GCM',
    key_id: keyring.current,
    iv: iv.toString('base64'),
    ciphertext: ciphertext.toString('base64'),
    tag: cipher.getAuthTag().toString('base64'),
  };
}

/** Opens a sealed secret; SealError 'TAMPERED' when anything, `aad` included, differs from what was sealed. */
export function openSecret(sealed: SealedSecret, keyring: Keyring, aad: string): string {
  const key = keyFor(keyring, sealed.key_id);
  const tampered = () => new SealError('TAMPERED', 'the sealed secret does not authenticate');
  const iv = decodeBase64(sealed.iv, IV_BYTES);
  const tag = decodeBase64(sealed.tag, TAG_BYTES);
  // GCM accepts other IV and tag lengths; a shortened tag would weaken the authentication.
  if (sealed.alg !== 'AES-256-GCM' || !iv || !tag) throw tampered();
  const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(tag);
  try {
    return Buffer.concat([decipher.update(Buffer.from(sealed.ciphertext, 'base64')), decipher.final()]).toString('utf8');
  } catch {
    throw tampered();
  }
}

function parseKey(text: string, where: string): Buffer {
  const key = decodeBase64(text, KEY_BYTES);
  if (!key) throw new KeyringError(`${where}the key is not base64 of ${KEY_BYTES} bytes`);
  return key;
}

/**
 * Parses a keyring specification (PGWARD_MASTER_KEY): one base64 32-byte key, whose id is `k1`, or
 * comma-separated `kid:base64key` entries of which the first is current.
 */
export function parseKeyring(spec: string): Keyring {
  const entries = spec.split(',').map((entry) => entry.trim());
  if (entries.length === 1 && entries[0] === '') throw new KeyringError('the keyring is empty');
  if (entries.length === 1 && !entries[0]!.includes(':')) return { current: 'k1', keys: new Map([['k1', parseKey(entries[0]!, '')]]) };
  const keys = new Map<string, Buffer>();
  entries.forEach((entry, index) => {
    const where = `entry ${index + 1}: `;
    // Base64 has no colon, while a key id may hold one.
    const colon = entry.lastIndexOf(':');
    if (colon < 0) throw new KeyringError(`${where}expected kid:base64key`);
    const keyId = entry.slice(0, colon);
    if (!KeyId.safeParse(keyId).success) throw new KeyringError(`${where}the key id must match [A-Za-z0-9][A-Za-z0-9_.:-]{0,63}`);
    if (keys.has(keyId)) throw new KeyringError(`${where}the key id is already used by an earlier entry`);
    keys.set(keyId, parseKey(entry.slice(colon + 1), where));
  });
  return { current: [...keys.keys()][0]!, keys };
}

function hasCode(error: unknown, code: string): boolean {
  return (error as NodeJS.ErrnoException | null)?.code === code;
}

async function readKeyringFile(path: string): Promise<Keyring> {
  const spec = await readFile(path, 'utf8');
  try {
    return parseKeyring(spec);
  } catch (error) {
    if (error instanceof KeyringError) throw new KeyringError(`${path}: ${error.message}`);
    throw error;
  }
}

/** Writes `content` to a new file with mode 0600 and flushes it to disk. */
async function writeNewFile(path: string, content: string): Promise<void> {
  const file = await open(path, 'wx', 0o600);
  try {
    await file.writeFile(content);
    await file.sync();
  } finally {
    await file.close();
  }
}

async function syncDirectory(path: string): Promise<void> {
  const directory = await open(path, 'r');
  try {
    await directory.sync();
  } finally {
    await directory.close();
  }
}

/**
 * The embedded default keyring: read from `path`, or created there with one random key (`k1`),
 * mode 0600. The file is written aside and then hard-linked into place, which fails if the file
 * exists, so processes starting together agree on one key and none reads a half-written file.
 */
export async function loadOrCreateKeyringFile(path: string): Promise<Keyring> {
  try {
    return await readKeyringFile(path);
  } catch (error) {
    if (!hasCode(error, 'ENOENT')) throw error;
  }
  const spec = `k1:${randomBytes(KEY_BYTES).toString('base64')}`;
  const staging = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await writeNewFile(staging, `${spec}\n`);
  try {
    await link(staging, path);
  } catch (error) {
    if (hasCode(error, 'EEXIST')) return readKeyringFile(path);
    throw error;
  } finally {
    await unlink(staging);
  }
  await syncDirectory(dirname(path));
  return parseKeyring(spec);
}
