import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { auditCheckpointNote, signAuditCheckpoint } from '../../src/audit/checkpoints.js';
import {
  CheckpointError,
  formatCheckpoint,
  generateAnchorKey,
  loadAnchorKey,
  loadAnchorPublicKey,
  noteKeyHash,
  openNote,
  parseCheckpoint,
  signCheckpoint,
  signNote,
  verifyCheckpoint,
  type CheckpointErrorCode,
} from '../../src/crypto/checkpoint.js';
import { AuditCheckpointSigned } from '../../src/events/audit.js';

// The signed-note example of the reference implementation (golang.org/x/mod/sumdb/note).
const GO_SEED = Buffer.from('AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz', 'base64').subarray(1);
const GO_PUBLIC = Buffer.from('ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW', 'base64').subarray(1);
const GO_TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
const GO_NOTE = `${GO_TEXT}\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n`;
const goPrivate = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', d: GO_SEED.toString('base64url'), x: GO_PUBLIC.toString('base64url') }, format: 'jwk' });
const goPublic = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: GO_PUBLIC.toString('base64url') }, format: 'jwk' });

const projectId = 'prj_01jq3v5m8k2r7t9w4x6y0z1a2b';
const anchor = loadAnchorKey(generateAnchorKey());
const checkpoint = { origin: projectId, size: 1000, root: Buffer.alloc(32, 7), chainStartSeq: 1 };
const text = formatCheckpoint(checkpoint);

function checkpointError(run: () => unknown): CheckpointErrorCode {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(CheckpointError);
    return (error as CheckpointError).code;
  }
  throw new Error('expected a CheckpointError');
}

function otherKey(): KeyObject {
  return generateKeyPairSync('ed25519').privateKey;
}

describe('C2SP signed notes', () => {
  it('signs and opens the reference example byte for byte', () => {
    expect(noteKeyHash('PeterNeumann', goPublic).toString('hex')).toBe('c74f20a3');
    expect(signNote(GO_TEXT, goPrivate, 'PeterNeumann')).toBe(GO_NOTE);
    expect(openNote(GO_NOTE, goPublic)).toBe(GO_TEXT);
  });

  it('refuses a note with an edited text, no line by the key, a failing line by the key, or a malformed line', () => {
    expect(checkpointError(() => openNote(GO_NOTE.replace('problem,', 'problem;'), goPublic))).toBe('UNVERIFIABLE');
    expect(checkpointError(() => openNote(GO_NOTE, anchor.publicKey))).toBe('UNVERIFIABLE');
    const forgedLine = `\u2014 PeterNeumann ${Buffer.concat([Buffer.from('c74f20a3', 'hex'), Buffer.alloc(64)]).toString('base64')}\n`;
    expect(checkpointError(() => openNote(`${GO_NOTE}${forgedLine}`, goPublic))).toBe('UNVERIFIABLE');
    expect(checkpointError(() => openNote(GO_NOTE.replace('\u2014', '--'), goPublic))).toBe('MALFORMED');
    expect(checkpointError(() => openNote(GO_TEXT, goPublic))).toBe('MALFORMED');
  });

  it('ignores signatures by other keys next to the one it checks', () => {
    const cosigned = `${GO_NOTE}${signNote(GO_TEXT, anchor.privateKey, 'pgward-anchor').split('\n\n')[1]}`;
    expect(openNote(cosigned, goPublic)).toBe(GO_TEXT);
    expect(openNote(cosigned, anchor.publicKey)).toBe(GO_TEXT);
  });

  it('refuses key names with spaces or "+", and text that does not end with a newline', () => {
    expect(checkpointError(() => signNote(GO_TEXT, goPrivate, 'Peter Neumann'))).toBe('MALFORMED');
    expect(checkpointError(() => signNote(GO_TEXT, goPrivate, 'Peter+Neumann'))).toBe('MALFORMED');
    expect(checkpointError(() => signNote('no newline', goPrivate, 'PeterNeumann'))).toBe('MALFORMED');
    expect(checkpointError(() => signNote('bell\x07\n', goPrivate, 'PeterNeumann'))).toBe('MALFORMED');
  });
});

describe('audit checkpoints', () => {
  it('writes the documented body: origin, size, base64 root, chain start extension line', () => {
    expect(text).toBe(`${projectId}\n1000\n${Buffer.alloc(32, 7).toString('base64')}\nchain_start_seq 1\n`);
    expect(parseCheckpoint(text)).toEqual(checkpoint);
  });

  it('parses only the exact form it writes', () => {
    const root = Buffer.alloc(32, 7).toString('base64');
    for (const bad of [
      `${projectId}\n1000\n${root}\n`,
      `${projectId}\n01000\n${root}\nchain_start_seq 1\n`,
      `${projectId}\n1000\n${root.replace('=', '')}\nchain_start_seq 1\n`,
      `${projectId}\n1000\n${Buffer.alloc(31).toString('base64')}\nchain_start_seq 1\n`,
      `${projectId}\n1000\n${root}\nchain_start_seq 1002\n`,
      `${projectId}\n1000\n${root}\nchain_start_seq 0\n`,
      `${projectId}\n1000\n${root}\nchain_start 1\n`,
      `${projectId}\n1000\n${root}\nchain_start_seq 1\nextra\n`,
      `\n1000\n${root}\nchain_start_seq 1\n`,
      `${projectId}\n99999999999999999999\n${root}\nchain_start_seq 1\n`,
    ]) {
      expect(checkpointError(() => parseCheckpoint(bad)), JSON.stringify(bad)).toBe('MALFORMED');
    }
  });

  it('verifies under the anchor key and nothing else', () => {
    const note = signCheckpoint(text, anchor.privateKey, 'anchor1');
    expect(verifyCheckpoint(note, anchor.publicKey)).toEqual(checkpoint);
    expect(checkpointError(() => verifyCheckpoint(note, createPublicKey(otherKey())))).toBe('UNVERIFIABLE');
    expect(checkpointError(() => verifyCheckpoint(note.replace('\n1000\n', '\n1001\n'), anchor.publicKey))).toBe('UNVERIFIABLE');
    expect(checkpointError(() => signCheckpoint(GO_TEXT, anchor.privateKey, 'anchor1'))).toBe('MALFORMED');
  });

  it('stores a checkpoint as an AuditCheckpointSigned payload and rebuilds its note', () => {
    const record = signAuditCheckpoint(checkpoint, { keyId: 'anchor1', privateKey: anchor.privateKey }, '2025-01-31T12:00:00.000Z');
    expect(AuditCheckpointSigned.schema.parse(record)).toEqual(record);
    expect(record).toMatchObject({ project_id: projectId, size: '1000', chain_start_seq: '1', key_id: 'anchor1' });
    const note = auditCheckpointNote(record, anchor.publicKey);
    expect(note).toBe(signCheckpoint(text, anchor.privateKey, 'anchor1'));
    expect(verifyCheckpoint(note, anchor.publicKey)).toEqual(checkpoint);
  });
});

describe('anchor keys', () => {
  it('generates PKCS#8 PEM that loads as an Ed25519 pair, and loads the public half alone', () => {
    const pem = generateAnchorKey();
    expect(pem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    const pair = loadAnchorKey(pem);
    const publicPem = pair.publicKey.export({ format: 'pem', type: 'spki' }).toString();
    const note = signCheckpoint(text, pair.privateKey, 'anchor1');
    expect(verifyCheckpoint(note, loadAnchorPublicKey(publicPem))).toEqual(checkpoint);
  });

  it('refuses what is not an Ed25519 key without quoting it', () => {
    const secret = 'hunter2-not-a-key';
    const error = (() => {
      try {
        loadAnchorKey(secret);
      } catch (e) {
        return e as CheckpointError;
      }
      throw new Error('expected an error');
    })();
    expect(error.code).toBe('BAD_KEY');
    expect(error.message).not.toContain(secret);
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    expect(checkpointError(() => loadAnchorKey(ec.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()))).toBe('BAD_KEY');
    expect(checkpointError(() => loadAnchorPublicKey(ec.publicKey.export({ format: 'pem', type: 'spki' }).toString()))).toBe('BAD_KEY');
  });
});
