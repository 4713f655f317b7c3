/**
 * The relay link's handshake (docs/regions.md#the-link), as pure functions: the frames it is made
 * of, and the origin's proof of the link secret, bound to the TLS session by its exporter value.
 * A frame is a type byte, a 4-byte length that counts itself, and a JSON body.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import { z } from 'zod';
import { REGION_PATTERN } from '../../src/events/fields.js';

const EXPORTER_LABEL = 'EXPORTER-pgward-relay';
const EXPORTER_BYTES = 32;

/** The TLS session's exporter value (RFC 8446 §7.5, empty context): the same on both ends of one session only. */
export function exporterOf(socket: Pick<TLSSocket, 'exportKeyingMaterial'>): Buffer {
  return socket.exportKeyingMaterial(EXPORTER_BYTES, EXPORTER_LABEL, Buffer.alloc(0));
}
const PROOF_CONTEXT = 'pgward-relay-v1';
const NONCE_BYTES = 16;
/** No handshake frame comes near this; a bigger length is a broken or hostile stream. */
export const MAX_FRAME_BYTES = 64 * 1024;
const HEADER_BYTES = 5;

export const FRAME = { hello: 'H', ready: 'Y', refused: 'X' } as const;

/** The pool the origin wants a connection of: the database's, read-only or not, or a provisioned policy role's. */
export interface RelayTarget {
  readonly project_id: string;
  readonly database_id: string;
  readonly read_only: boolean;
  /** A provisioned policy role's name; '' for the database's own login. */
  readonly role: string;
  /** The sandbox branch (write_mode sandbox) whose database it connects to; '' for the database itself. */
  readonly branch: string;
  /** The link is for reads outside transactions only: the peer may take a healthy replica's connection for it (docs/regions.md#read-routing). */
  readonly reads?: true | undefined;
}

/** A cancel of what the link whose (remapped) key this is runs. */
export interface RelayCancel {
  readonly process_id: number;
  /** 4 bytes, base64. */
  readonly secret_key: string;
}

/** What the origin says of itself and wants, before its proof. */
export interface HelloFields {
  readonly origin_region: string;
  readonly origin_proxy_id: string;
  /** The region the origin means to reach: a peer of another region refuses (`wrong_region`). */
  readonly region: string;
  readonly target?: RelayTarget | undefined;
  readonly cancel?: RelayCancel | undefined;
}

export interface RelayHello extends HelloFields {
  /** base64 */
  readonly nonce: string;
  /** base64 HMAC-SHA-256 */
  readonly proof: string;
}

export interface RelayReady {
  readonly region: string;
  /** The upstream's ParameterStatus values of its start-up. */
  readonly parameters: Readonly<Record<string, string>>;
  /** The key the origin cancels with: the peer's own, standing for the upstream's. */
  readonly process_id: number;
  readonly secret_key: string;
  /** The peer's read replica the link runs on; absent on the peer's primary. */
  readonly replica_id?: string | undefined;
}

export const REFUSAL_REASONS = ['bad_proof', 'unknown_database', 'wrong_region', 'no_upstream', 'bad_hello'] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export interface RelayRefused {
  readonly reason: RefusalReason;
}

const Region = z.string().regex(REGION_PATTERN);
const Base64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/).max(1024);
const Name = z.string().min(1).max(128);

const Hello = z.strictObject({
  origin_region: Region,
  origin_proxy_id: Name,
  region: Region,
  target: z.strictObject({ project_id: Name, database_id: Name, read_only: z.boolean(), role: z.string().max(128), branch: z.string().max(128), reads: z.literal(true).optional() }).optional(),
  cancel: z.strictObject({ process_id: z.int(), secret_key: Base64 }).optional(),
  nonce: Base64,
  proof: Base64,
});

const Ready = z.strictObject({
  region: Region,
  parameters: z.record(z.string(), z.string()),
  process_id: z.int(),
  secret_key: Base64,
  replica_id: Name.optional(),
});

const Refused = z.strictObject({ reason: z.enum(REFUSAL_REASONS) });

export function encodeFrame(type: string, body: object): Buffer {
  const json = Buffer.from(JSON.stringify(body), 'utf8');
  const frame = Buffer.alloc(HEADER_BYTES + json.length);
  frame.write(type, 0, 'latin1');
  frame.writeUInt32BE(4 + json.length, 1);
  json.copy(frame, HEADER_BYTES);
  return frame;
}

export interface Frame {
  readonly type: string;
  readonly body: unknown;
}

export class HandshakeError extends Error {
  override readonly name = 'HandshakeError';
}

/**
 * The first whole frame of `pending` and what follows it, or undefined while it is not whole.
 * Throws HandshakeError on a length out of bounds or a body that is not JSON.
 */
export function takeFrame(pending: Buffer): { frame: Frame; rest: Buffer } | undefined {
  if (pending.length < HEADER_BYTES) return undefined;
  const size = 1 + pending.readUInt32BE(1);
  if (size < HEADER_BYTES || size > MAX_FRAME_BYTES) throw new HandshakeError(`a handshake frame of ${size} bytes`);
  if (pending.length < size) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(pending.toString('utf8', HEADER_BYTES, size));
  } catch {
    throw new HandshakeError('a handshake frame whose body is not JSON');
  }
  return { frame: { type: String.fromCharCode(pending[0]!), body }, rest: pending.subarray(size) };
}

/** The signed fields in a fixed order, each length-prefixed, so that no two hellos sign the same bytes. */
function signedBytes(fields: HelloFields, nonce: Buffer): Buffer {
  const { target, cancel } = fields;
  const parts = [
    fields.origin_region,
    fields.origin_proxy_id,
    fields.region,
    target ? `target:${target.project_id}` : '',
    target?.database_id ?? '',
    target ? String(target.read_only) : '',
    target?.role ?? '',
    target?.branch ?? '',
    cancel ? `cancel:${cancel.process_id}` : '',
    cancel?.secret_key ?? '',
    // Only when set, so that a hello without it signs what it did before the field existed.
    ...(target?.reads ? ['reads'] : []),
  ];
  const encoded = parts.flatMap((part) => {
    const bytes = Buffer.from(part, 'utf8');
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    return [length, bytes];
  });
  return Buffer.concat([nonce, ...encoded]);
}

/** HMAC-SHA-256(secret, "pgward-relay-v1" ‖ exporter ‖ nonce ‖ the hello's other fields). */
export function helloProof(secret: Buffer, exporter: Buffer, fields: HelloFields, nonce: Buffer): Buffer {
  return createHmac('sha256', secret).update(PROOF_CONTEXT).update(exporter).update(signedBytes(fields, nonce)).digest();
}

/** The origin's hello for this TLS session (`exporter`), signed with the current secret. */
export function makeHello(fields: HelloFields, secret: Buffer, exporter: Buffer, nonce: Buffer = randomBytes(NONCE_BYTES)): RelayHello {
  return { ...fields, nonce: nonce.toString('base64'), proof: helloProof(secret, exporter, fields, nonce).toString('base64') };
}

/** A hello as the peer reads it: undefined when it is malformed (neither or both of target and cancel, fields out of shape). */
export function decodeHello(body: unknown): RelayHello | undefined {
  const parsed = Hello.safeParse(body);
  if (!parsed.success || (parsed.data.target === undefined) === (parsed.data.cancel === undefined)) return undefined;
  if (Buffer.from(parsed.data.nonce, 'base64').length !== NONCE_BYTES) return undefined;
  return parsed.data;
}

/**
 * Whether the hello's proof was made with one of `secrets` (the current one, then the previous
 * one during a rotation) for this TLS session. Every secret is tried, compared in constant time.
 */
export function proofHolds(hello: RelayHello, secrets: readonly Buffer[], exporter: Buffer): boolean {
  const given = Buffer.from(hello.proof, 'base64');
  const nonce = Buffer.from(hello.nonce, 'base64');
  let holds = false;
  for (const secret of secrets) {
    const expected = helloProof(secret, exporter, hello, nonce);
    if (given.length === expected.length && timingSafeEqual(given, expected)) holds = true;
  }
  return holds;
}

/** The peer's answer to a hello, as the origin reads it: ready, refused, or undefined when it is neither (a broken peer). */
export function decodeAnswer(frame: Frame): { ready: RelayReady } | { refused: RelayRefused } | undefined {
  if (frame.type === FRAME.ready) {
    const parsed = Ready.safeParse(frame.body);
    return parsed.success && Buffer.from(parsed.data.secret_key, 'base64').length === 4 ? { ready: parsed.data } : undefined;
  }
  if (frame.type === FRAME.refused) {
    const parsed = Refused.safeParse(frame.body);
    return parsed.success ? { refused: parsed.data } : undefined;
  }
  return undefined;
}
