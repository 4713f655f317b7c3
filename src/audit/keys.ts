import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../config.js';
import { generateAnchorKey, loadAnchorKey, type AnchorKeyPair } from '../crypto/checkpoint.js';
import { parseHmacKeyring, type HmacKeyring } from './chain.js';

/** PGWARD_AUDIT_HMAC_KEYS, or no keys: entries are then hashed with plain SHA-256. */
export function auditKeysFrom(config: Pick<Config, 'PGWARD_AUDIT_HMAC_KEYS'>): HmacKeyring {
  return config.PGWARD_AUDIT_HMAC_KEYS ? parseHmacKeyring(config.PGWARD_AUDIT_HMAC_KEYS) : { keys: new Map() };
}

export const ANCHOR_KEY_NAME = 'pgward-audit-anchor';

/**
 * The anchor key that signs checkpoints: PGWARD_AUDIT_ANCHOR_KEY (a PEM file), or for the embedded
 * default one generated once into the data directory (mode 0600).
 */
export async function loadAnchor(config: Pick<Config, 'PGWARD_AUDIT_ANCHOR_KEY' | 'PGWARD_DATA_DIR'>): Promise<AnchorKeyPair> {
  const file = config.PGWARD_AUDIT_ANCHOR_KEY ?? join(config.PGWARD_DATA_DIR, 'audit-anchor.pem');
  if (!config.PGWARD_AUDIT_ANCHOR_KEY && !existsSync(file)) await writeFile(file, generateAnchorKey(), { mode: 0o600, flag: 'wx' }).catch(() => undefined);
  return loadAnchorKey(await readFile(file, 'utf8'));
}
