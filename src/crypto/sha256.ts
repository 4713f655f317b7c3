import { hash } from 'node:crypto';

/**
 * SHA-256 as a latin1 string of 32 characters, one per byte: Node 20 returns a digest in that form,
 * and writes one into a buffer, about twice as fast as it returns or decodes hex ('buffer' output is slower still).
 */
export function sha256Latin1(data: string | Uint8Array): string {
  return hash('sha256', data, 'binary');
}

export function sha256(data: string | Uint8Array): Buffer {
  return Buffer.from(sha256Latin1(data), 'latin1');
}
