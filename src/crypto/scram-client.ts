/**
 * The client side of SCRAM-SHA-256 (RFC 5802, RFC 7677) as libpq speaks it, without channel binding:
 * pure functions the upstream connection drives message by message.
 */
import { pbkdf2, randomBytes, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';
import { attributes, decodeBase64, expectAttribute, hmac, isPrintable, KEY_BYTES, malformed, NONCE_BYTES, saslprep, ScramError, sha256, xor } from './scram.js';

const derive = promisify(pbkdf2);

/** We do not support channel binding, and say so: `n`, no authorization identity. */
const GS2_HEADER = 'n,,';
const CHANNEL_BINDING = Buffer.from(GS2_HEADER).toString('base64');

/**
 * PostgreSQL sends whatever iteration count the stored verifier has (scram_iterations may be set
 * from 1 up). The upper bound stops a hostile upstream from occupying a thread-pool thread for hours.
 */
const MAX_ITERATIONS = 10_000_000;

export interface ScramClientState {
  readonly nonce: string;
  /** client-first-message-bare, part of the AuthMessage. */
  readonly clientFirstBare: string;
}

/**
 * The client-first message (`n,,n=*,r=<nonce>`; PostgreSQL takes the user from the startup packet).
 * `nonce` is printable ASCII; by default base64 of 18 random bytes, as libpq sends.
 */
export function scramClientFirst(nonce: string = randomBytes(NONCE_BYTES).toString('base64')): { message: string; state: ScramClientState } {
  if (!isPrintable(nonce)) throw new RangeError('the client nonce must be printable ASCII');
  const clientFirstBare = `n=*,r=${nonce}`;
  return { message: `${GS2_HEADER}${clientFirstBare}`, state: { nonce, clientFirstBare } };
}

interface ServerFirst {
  readonly nonce: string;
  readonly salt: Buffer;
  readonly iterations: number;
}

/** `r=<nonce>,s=<salt>,i=<iterations>[,extensions]`; a mandatory extension (`m=`) is refused. */
function parseServerFirst(state: ScramClientState, message: string): ServerFirst {
  const [first, second, third] = attributes(message);
  if (first?.name === 'm') throw new ScramError('EXTENSION_UNSUPPORTED', 'the server requires a SCRAM extension, which is not supported');
  const nonce = expectAttribute(first, 'r');
  if (!nonce.startsWith(state.nonce) || nonce.length === state.nonce.length || !isPrintable(nonce)) {
    throw new ScramError('NONCE_MISMATCH', 'the server nonce does not extend the client nonce');
  }
  const saltText = expectAttribute(second, 's');
  const salt = Buffer.from(saltText, 'base64');
  if (salt.length === 0 || salt.toString('base64') !== saltText) throw malformed('the salt must be base64');
  const iterationText = expectAttribute(third, 'i');
  const iterations = Number(iterationText);
  if (!/^[1-9][0-9]{0,9}$/.test(iterationText) || iterations > MAX_ITERATIONS) throw malformed(`the iteration count must be an integer from 1 to ${MAX_ITERATIONS}`);
  return { nonce, salt, iterations };
}

/**
 * The client-final message for the server-first message, and the server signature the server-final
 * message must carry. The key derivation runs on the thread pool. As in libpq, a password that
 * SASLprep refuses is used as it is.
 */
export async function scramClientFinal(
  state: ScramClientState,
  serverFirst: string,
  password: string,
): Promise<{ message: string; expectedServerSignature: Buffer }> {
  const { nonce, salt, iterations } = parseServerFirst(state, serverFirst);
  const saltedPassword = await derive(saslprep(password) ?? password, salt, iterations, KEY_BYTES, 'sha256');
  const withoutProof = `c=${CHANNEL_BINDING},r=${nonce}`;
  const authMessage = `${state.clientFirstBare},${serverFirst},${withoutProof}`;
  const clientKey = hmac(saltedPassword, 'Client Key');
  const proof = xor(clientKey, hmac(sha256(clientKey), authMessage));
  return {
    message: `${withoutProof},p=${proof.toString('base64')}`,
    expectedServerSignature: hmac(hmac(saltedPassword, 'Server Key'), authMessage),
  };
}

/** Whether the server-final message (`v=<ServerSignature>[,extensions]`) proves the server knows the verifier. */
export function verifyServerFinal(expectedServerSignature: Buffer, serverFinal: string): boolean {
  const match = /^v=([^,]*)(?:,|$)/.exec(serverFinal);
  const signature = match ? decodeBase64(match[1]!, KEY_BYTES) : undefined;
  return signature !== undefined && expectedServerSignature.length === KEY_BYTES && timingSafeEqual(signature, expectedServerSignature);
}
