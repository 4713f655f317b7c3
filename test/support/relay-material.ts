import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SecureContext } from 'node:tls';
import { certificateFingerprint } from '../../proxy/relay/link.js';
import { GENERATED, loadTls } from '../../proxy/tls.js';

/** A proxy's TLS material as a proxy generates it (in `dir`, for the caller to remove), with what an origin pins or trusts it by. */
export interface RelayMaterial {
  readonly dir: string;
  readonly tls: SecureContext;
  /** The SHA-256 of its certificate (DER), as PGWARD_REGION_PEERS pins it. */
  readonly fingerprint: Buffer;
  /** The PEM of the CA that issued it. */
  readonly ca: Buffer;
}

export async function relayMaterial(): Promise<RelayMaterial> {
  const dir = await mkdtemp(join(tmpdir(), 'pgward-relay-'));
  const tls = await loadTls({ dataDir: dir, hosts: ['127.0.0.1'] });
  const der = new X509Certificate(await readFile(join(dir, GENERATED.cert))).raw;
  return { dir, tls, fingerprint: certificateFingerprint(der), ca: await readFile(join(dir, GENERATED.caCert)) };
}
