/**
 * Signed checkpoints of a log, in the C2SP formats: the checkpoint body of c2sp.org/tlog-checkpoint
 * and the Ed25519 signed note of c2sp.org/signed-note. The body is
 *
 *   <origin>\n
 *   <size, decimal>\n
 *   <root hash, standard padded base64 of 32 bytes>\n
 *   chain_start_seq <seq, decimal>\n
 *
 * where the last line is this log's one extension line. A note appends a blank line and one
 * signature line per signer: U+2014, space, key name, space, base64(key hash[4] ‖ signature[64]),
 * newline, with key hash = SHA-256(key name ‖ 0x0A ‖ 0x01 ‖ Ed25519 public key)[0..4].
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';

const ROOT_BYTES = 32;
const SIGNATURE_BYTES = 64;
const KEY_HASH_BYTES = 4;
const ED25519_ALGORITHM = 0x01;
const MAX_SIGNATURES = 100;
const CHAIN_START = 'chain_start_seq ';
const DECIMAL = /^(0|[1-9][0-9]*)$/;
const KEY_NAME = /^[^\s+]+$/u;
const SIGNATURE_LINE = /^\u2014 (\S+) ([A-Za-z0-9+/]+={0,2})$/u;

export interface Checkpoint {
  /** Names the log: the project id for an audit chain. */
  readonly origin: string;
  readonly size: number;
  /** RFC 6962 Merkle tree hash of entries 1..size. */
  readonly root: Buffer;
  /** First seq of the hash chain; entries before it are legacy entries. */
  readonly chainStartSeq: number;
}

export interface NoteSignature {
  readonly keyName: string;
  readonly keyHash: Buffer;
  readonly signature: Buffer;
}

export interface SignedNote {
  /** The signed text, ending with a newline. */
  readonly text: string;
  readonly signatures: readonly NoteSignature[];
}

export type CheckpointErrorCode = 'MALFORMED' | 'UNVERIFIABLE' | 'BAD_KEY';

/** A checkpoint, note or key that cannot be used; messages never quote key material. */
export class CheckpointError extends Error {
  override readonly name = 'CheckpointError';
  constructor(
    readonly code: CheckpointErrorCode,
    message: string,
  ) {
    super(message);
  }
}

function malformed(message: string): CheckpointError {
  return new CheckpointError('MALFORMED', message);
}

/** C2SP notes carry no ASCII control character but newline. */
function hasControl(text: string, newlineAllowed: boolean): boolean {
  for (let i = 0; i < text.length; i += 1) {
    const code = text.charCodeAt(i);
    if (code < 0x20 && !(newlineAllowed && code === 0x0a)) return true;
  }
  return false;
}

function parseDecimal(text: string, what: string): number {
  const value = Number(text);
  if (!DECIMAL.test(text) || !Number.isSafeInteger(value)) throw malformed(`the ${what} is not a decimal integer`);
  return value;
}

function checkCheckpoint(c: Checkpoint): void {
  if (c.origin === '' || hasControl(c.origin, false)) throw malformed('the origin must be one non-empty line');
  if (!Number.isSafeInteger(c.size) || c.size < 0) throw malformed('the size must be a non-negative integer');
  if (c.root.length !== ROOT_BYTES) throw malformed(`the root must be ${ROOT_BYTES} bytes`);
  if (!Number.isSafeInteger(c.chainStartSeq) || c.chainStartSeq < 1 || c.chainStartSeq > c.size + 1) {
    throw malformed('the chain start must be between 1 and size + 1');
  }
}

export function formatCheckpoint(c: Checkpoint): string {
  checkCheckpoint(c);
  return `${c.origin}\n${c.size}\n${c.root.toString('base64')}\n${CHAIN_START}${c.chainStartSeq}\n`;
}

/** Parses a checkpoint body; only the exact form formatCheckpoint writes is accepted. */
export function parseCheckpoint(text: string): Checkpoint {
  const lines = text.split('\n');
  if (lines.length !== 5 || lines[4] !== '') throw malformed('a checkpoint is four lines, each ending with a newline');
  const [origin, size, root, extension] = lines as [string, string, string, string];
  const rootBytes = Buffer.from(root, 'base64');
  if (rootBytes.toString('base64') !== root) throw malformed('the root is not canonical base64');
  if (!extension.startsWith(CHAIN_START)) throw malformed(`the fourth line must be "${CHAIN_START}<seq>"`);
  const checkpoint = {
    origin,
    size: parseDecimal(size, 'size'),
    root: rootBytes,
    chainStartSeq: parseDecimal(extension.slice(CHAIN_START.length), 'chain start'),
  };
  checkCheckpoint(checkpoint);
  return checkpoint;
}

function rawPublicKey(publicKey: KeyObject): Buffer {
  if (publicKey.type !== 'public' || publicKey.asymmetricKeyType !== 'ed25519') throw new CheckpointError('BAD_KEY', 'expected an Ed25519 public key');
  return Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
}

function checkKeyName(keyName: string): void {
  if (!KEY_NAME.test(keyName)) throw malformed('a key name is non-empty, without spaces or "+"');
}

/** The C2SP key hash that names an Ed25519 key in signature lines. */
export function noteKeyHash(keyName: string, publicKey: KeyObject): Buffer {
  checkKeyName(keyName);
  return createHash('sha256')
    .update(keyName, 'utf8')
    .update(Buffer.from([0x0a, ED25519_ALGORITHM]))
    .update(rawPublicKey(publicKey))
    .digest()
    .subarray(0, KEY_HASH_BYTES);
}

function checkText(text: string): void {
  if (!text.endsWith('\n') || hasControl(text, true)) throw malformed('note text ends with a newline and has no control character');
}

export function formatNote(note: SignedNote): string {
  checkText(note.text);
  if (note.signatures.length === 0) throw malformed('a note has at least one signature');
  const lines = note.signatures.map(({ keyName, keyHash, signature }) => {
    checkKeyName(keyName);
    if (keyHash.length !== KEY_HASH_BYTES) throw malformed(`a key hash is ${KEY_HASH_BYTES} bytes`);
    return `\u2014 ${keyName} ${Buffer.concat([keyHash, signature]).toString('base64')}\n`;
  });
  return `${note.text}\n${lines.join('')}`;
}

export function parseNote(note: string): SignedNote {
  const split = note.lastIndexOf('\n\n');
  if (split < 0 || !note.endsWith('\n')) throw malformed('a note is text, a blank line and signature lines');
  const text = note.slice(0, split + 1);
  checkText(text);
  const lines = note.slice(split + 2, -1).split('\n');
  if (lines.length > MAX_SIGNATURES) throw malformed(`a note carries at most ${MAX_SIGNATURES} signatures`);
  const signatures = lines.map((line) => {
    const match = SIGNATURE_LINE.exec(line);
    const bytes = Buffer.from(match?.[2] ?? '', 'base64');
    if (!match || bytes.toString('base64') !== match[2] || bytes.length <= KEY_HASH_BYTES) throw malformed('a signature line is malformed');
    return { keyName: match[1]!, keyHash: bytes.subarray(0, KEY_HASH_BYTES), signature: bytes.subarray(KEY_HASH_BYTES) };
  });
  return { text, signatures };
}

function checkPrivateKey(privateKey: KeyObject): void {
  if (privateKey.type !== 'private' || privateKey.asymmetricKeyType !== 'ed25519') throw new CheckpointError('BAD_KEY', 'expected an Ed25519 private key');
}

/** Signs `text` as a C2SP note with one Ed25519 signature under `keyName`. */
export function signNote(text: string, privateKey: KeyObject, keyName: string): string {
  checkText(text);
  checkPrivateKey(privateKey);
  const signature = sign(null, Buffer.from(text, 'utf8'), privateKey);
  return formatNote({ text, signatures: [{ keyName, keyHash: noteKeyHash(keyName, createPublicKey(privateKey)), signature }] });
}

/**
 * The text of `note` when a signature line names `publicKey` (by its key hash under the line's key
 * name) and verifies. As C2SP requires, a failing signature by that key rejects the note even when
 * another line would verify.
 */
export function openNote(note: string, publicKey: KeyObject): string {
  const { text, signatures } = parseNote(note);
  const message = Buffer.from(text, 'utf8');
  const candidates = signatures.filter(({ keyName, keyHash }) => KEY_NAME.test(keyName) && keyHash.equals(noteKeyHash(keyName, publicKey)));
  if (candidates.length === 0) throw new CheckpointError('UNVERIFIABLE', 'the note has no signature by this key');
  for (const { signature } of candidates) {
    if (signature.length !== SIGNATURE_BYTES || !verify(null, message, publicKey, signature)) {
      throw new CheckpointError('UNVERIFIABLE', 'the signature does not verify');
    }
  }
  return text;
}

/** Signs a checkpoint body (refusing text that is not one) as a note. */
export function signCheckpoint(text: string, privateKey: KeyObject, keyName: string): string {
  parseCheckpoint(text);
  return signNote(text, privateKey, keyName);
}

/** Opens a signed checkpoint under `publicKey` and parses its body. */
export function verifyCheckpoint(note: string, publicKey: KeyObject): Checkpoint {
  return parseCheckpoint(openNote(note, publicKey));
}

/** A new Ed25519 anchor key, as PKCS#8 PEM. */
export function generateAnchorKey(): string {
  return generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
}

export interface AnchorKeyPair {
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
}

/** Loads an Ed25519 private key from PEM (such as PGWARD_AUDIT_ANCHOR_KEY). */
export function loadAnchorKey(pem: string): AnchorKeyPair {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(pem);
  } catch {
    throw new CheckpointError('BAD_KEY', 'the anchor key is not a PEM private key');
  }
  checkPrivateKey(privateKey);
  return { privateKey, publicKey: createPublicKey(privateKey) };
}

/** Loads the Ed25519 public key an auditor verifies checkpoints with, from PEM. */
export function loadAnchorPublicKey(pem: string): KeyObject {
  let publicKey: KeyObject;
  try {
    publicKey = createPublicKey(pem);
  } catch {
    throw new CheckpointError('BAD_KEY', 'the anchor public key is not PEM');
  }
  rawPublicKey(publicKey);
  return publicKey;
}
