/**
 * Field schemas shared by the event catalog. Every string an event carries is `text`: read models
 * live in PostgreSQL, whose text type cannot hold NUL, and UTF-8 cannot carry a lone surrogate.
 */
import { z } from 'zod';
import type { Json } from '../crypto/canonical-json.js';

/** No NUL and no lone surrogate: the characters `text` allows. */
export const TEXT_PATTERN = /^[^\0\p{Cs}]*$/u;

/** A string of `min`..`max` characters with no NUL and no lone surrogate. */
export function text(max: number, min = 0) {
  return z.string().min(min).max(max).regex(TEXT_PATTERN, { message: 'must not contain NUL or a lone surrogate' });
}

/** An identifier: `prefix` (e.g. `agt_`) followed by 20–40 characters of [a-z0-9], such as a lowercased ULID. */
export function idPattern(prefix: `${string}_`): RegExp {
  return new RegExp(`^${prefix}[a-z0-9]{20,40}$`);
}

export function idSchema(prefix: `${string}_`) {
  return z.string().regex(idPattern(prefix), { message: `expected an id of the form ${prefix}[a-z0-9]{20,40}` });
}

export const OrgId = idSchema('org_');
export const ProjectId = idSchema('prj_');
export const DatabaseId = idSchema('db_');
export const ReplicaId = idSchema('rep_');
export const PolicyId = idSchema('pol_');
export const CredentialId = idSchema('agt_');
export const ApprovalId = idSchema('apr_');
export const AnomalyId = idSchema('ano_');
export const AuditEntryId = idSchema('aud_');
export const HoneytokenId = idSchema('hnt_');
export const ApiKeyId = idSchema('key_');
export const WebhookId = idSchema('whk_');
export const DomainId = idSchema('dom_');
export const BranchId = idSchema('brn_');

/** UTC instant with millisecond precision: `2025-01-31T12:00:00.000Z`. */
export const Timestamp = z.iso.datetime({ offset: false, precision: 3 });

/**
 * A non-negative 64-bit count as a decimal string: no sign, no leading zero, at most 2^63 − 1.
 * The format check aborts, so later checks and refinements of enclosing objects may call BigInt on it.
 */
export const INT64_PATTERN = /^(0|[1-9][0-9]{0,18})$/;
export const INT64_MAX = 9_223_372_036_854_775_807n;
export const Int64String = z
  .string()
  .regex(INT64_PATTERN, { message: 'expected a non-negative integer as a decimal string', abort: true })
  .refine((s) => BigInt(s) <= INT64_MAX, { message: 'exceeds the int64 range' });

export const SHA256_HEX_PATTERN = /^[0-9a-f]{64}$/;
export const Sha256Hex = z.string().regex(SHA256_HEX_PATTERN, { message: 'expected a lowercase hex SHA-256' });

/** Canonical padded base64 (what `Buffer#toString('base64')` emits) of `min`..`max` bytes. */
export function base64Bytes(min: number, max = min) {
  return z.string().refine(
    (s) => {
      const bytes = Buffer.from(s, 'base64');
      return bytes.toString('base64') === s && bytes.length >= min && bytes.length <= max;
    },
    { message: `expected canonical base64 of ${min === max ? min : `${min}..${max}`} bytes` },
  );
}

/** Id of a key in a keyring (sealing, HMAC or signing key), not an organization API key. */
export const KeyId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/, { message: 'expected a key id' });

/** A secret sealed with AES-256-GCM under the keyring key `key_id`; never the plaintext. */
export const SealedSecret = z.strictObject({
  alg: z.literal('AES-256-GCM'),
  key_id: KeyId,
  iv: base64Bytes(12),
  ciphertext: base64Bytes(1, 4096),
  tag: base64Bytes(16),
});
export type SealedSecret = z.infer<typeof SealedSecret>;

/** A SCRAM-SHA-256 verifier (RFC 5802/7677): what the server keeps instead of a password. */
export const ScramVerifier = z.strictObject({
  iterations: z.int().min(4096),
  salt: base64Bytes(16, 64),
  stored_key: base64Bytes(32),
  server_key: base64Bytes(32),
});
export type ScramVerifier = z.infer<typeof ScramVerifier>;

/** The leading characters of a token or API key, kept so humans can tell secrets apart. */
export const SecretPrefix = z.string().regex(/^[A-Za-z0-9_-]{4,32}$/, { message: 'expected 4-32 characters of [A-Za-z0-9_-]' });

/** Who did something: a user id, an API key id or a system role, as in event metadata. */
export const Actor = text(200, 1);

/** A note attached to a decision (spec §8: at most 500 characters). */
export const Reason = text(500);

/** A data-plane region such as `eu-west-1`. */
export const REGION_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const Region = z.string().regex(REGION_PATTERN, { message: 'expected a region name' });

/** Groups one connection's statements; unique per connection within a proxy instance. */
export const SESSION_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;
export const SessionId = z.string().regex(SESSION_ID_PATTERN, { message: 'expected a session id' });

/** Parsed statement kind, lowercase: `select`, `update`, `delete`, `ddl`, ... */
export const STATEMENT_KIND_PATTERN = /^[a-z][a-z_]{0,31}$/;
export const StatementKind = z.string().regex(STATEMENT_KIND_PATTERN, { message: 'expected a lowercase statement kind' });

/** A table as a statement named it: schema-qualified when the statement qualified it. */
export const TableName = text(255, 1);

const identifierPart = '[^.\\0]{1,63}';
/** `schema.table`. */
export const QualifiedTable = z
  .string()
  .regex(new RegExp(`^${identifierPart}\\.${identifierPart}$`), { message: 'expected schema.table' });
/** `schema.table.column`. */
export const QualifiedColumn = z
  .string()
  .regex(new RegExp(`^${identifierPart}\\.${identifierPart}\\.${identifierPart}$`), { message: 'expected schema.table.column' });

/** JSON whose numbers are all safe integers: events carry no floats. */
export const IntegralJson: z.ZodType<Json> = z.lazy(() =>
  z.union([z.null(), z.boolean(), z.int(), text(10_000), z.array(IntegralJson), z.record(text(200), IntegralJson)]),
);

/** The partial `changes` of an update event: any subset of `shape`, but at least one field. */
export function changes<S extends z.ZodRawShape>(shape: S) {
  return z
    .strictObject(shape)
    .partial()
    .refine((c) => Object.values(c).some((v) => v !== undefined), { message: 'changes must name at least one field' });
}
