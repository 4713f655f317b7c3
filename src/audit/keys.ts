import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigError, readConfiguredFile, type Config } from '../config.js';
import { CheckpointError, generateAnchorKey, loadAnchorKey, type AnchorKeyPair } from '../crypto/checkpoint.js';
import { parseHmacKeyring, type HmacKeyring } from './chain.js';

/** PGWARD_AUDIT_HMAC_KEYS, or no keys: entries are then hashed with plain SHA-256. */
export function auditKeysFrom(config: Pick<Config, 'PGWARD_AUDIT_HMAC_KEYS'>): HmacKeyring {
  return config.PGWARD_AUDIT_HMAC_KEYS ? parseHmacKeyring(config.PGWARD_AUDIT_HMAC_KEYS) : { keys: new Map() };
}

export const ANCHOR_KEY_NAME = 'pgward-audit-anchor';

/**
 * The anchor key that signs checkpoints: PGWARD_AUDIT_ANCHOR_KEY (a PEM file), or for the embedded
 * default one generated once into the data directory (mode 0600), `onGenerated` told. With
 * PGWARD_STATE_URL the key is required: every process must sign with one key, and it must outlive
 * this machine's data directory as the trail it signs does.
 */
export async function loadAnchor(config: Pick<Config, 'PGWARD_AUDIT_ANCHOR_KEY' | 'PGWARD_DATA_DIR' | 'PGWARD_STATE_URL'>, onGenerated?: (file: string) => void): Promise<AnchorKeyPair> {
  if (config.PGWARD_AUDIT_ANCHOR_KEY) {
    const pem = (await readConfiguredFile('PGWARD_AUDIT_ANCHOR_KEY', config.PGWARD_AUDIT_ANCHOR_KEY)).toString('utf8');
    try {
      return loadAnchorKey(pem);
    } catch (error) {
      if (error instanceof CheckpointError) throw new ConfigError('PGWARD_AUDIT_ANCHOR_KEY', `expected an Ed25519 private key (PKCS#8 PEM): ${error.message}`);
      throw error;
    }
  }
  if (config.PGWARD_STATE_URL) {
    throw new ConfigError('PGWARD_AUDIT_ANCHOR_KEY', 'is required when PGWARD_STATE_URL is set (an Ed25519 private key, PKCS#8 PEM: openssl genpkey -algorithm ed25519 -out anchor.pem)');
  }
  const file = join(config.PGWARD_DATA_DIR, 'audit-anchor.pem');
  await mkdir(config.PGWARD_DATA_DIR, { recursive: true });
  // Exclusive: of two processes creating it at once, one writes and both read that one.
  const created = await writeFile(file, generateAnchorKey(), { mode: 0o600, flag: 'wx' }).then(
    () => true,
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'EEXIST') return false;
      throw error;
    },
  );
  if (created) onGenerated?.(file);
  return loadAnchorKey(await readFile(file, 'utf8'));
}
