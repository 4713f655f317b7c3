/**
 * RFC 6962 §2.1 Merkle tree hash over SHA-256: a leaf is SHA-256(0x00 ‖ data), an interior node
 * SHA-256(0x01 ‖ left ‖ right), a tree of n > 1 leaves splits at the largest power of two smaller
 * than n, and the empty tree hashes to SHA-256("").
 * Inside, a hash is a latin1 string (sha256Latin1), which Node 20 returns and writes faster than a Buffer.
 */
import { sha256, sha256Latin1 } from './sha256.js';

const LEAF_PREFIX = Buffer.from([0x00]);
const HASH_BYTES = 32;
/** 0x01 ‖ left ‖ right, rewritten for each interior node (hashing is synchronous). */
const nodeInput = Buffer.alloc(1 + 2 * HASH_BYTES, 0x01);

function nodeDigest(left: string, right: string): string {
  nodeInput.write(left, 1, 'latin1');
  nodeInput.write(right, 1 + HASH_BYTES, 'latin1');
  return sha256Latin1(nodeInput);
}

function leafDigest(data: Uint8Array): string {
  return sha256Latin1(Buffer.concat([LEAF_PREFIX, data]));
}

export function leafHash(data: Uint8Array): Buffer {
  return Buffer.from(leafDigest(data), 'latin1');
}

/** The interior node over two subtree hashes (32 bytes each). */
export function nodeHash(left: Uint8Array, right: Uint8Array): Buffer {
  if (left.length !== HASH_BYTES || right.length !== HASH_BYTES) throw new RangeError('a Merkle node joins two 32-byte hashes');
  return Buffer.from(nodeDigest(Buffer.from(left).toString('latin1'), Buffer.from(right).toString('latin1')), 'latin1');
}

function emptyRoot(): Buffer {
  return sha256(new Uint8Array(0));
}

function largestPowerOfTwoBelow(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

function subtreeHash(leaves: readonly Uint8Array[], start: number, end: number): Buffer {
  if (end - start === 1) return leafHash(leaves[start]!);
  const split = start + largestPowerOfTwoBelow(end - start);
  return nodeHash(subtreeHash(leaves, start, split), subtreeHash(leaves, split, end));
}

/** The Merkle tree hash of `leaves` (leaf inputs, not leaf hashes), by the RFC's recursive definition. */
export function merkleRoot(leaves: readonly Uint8Array[]): Buffer {
  return leaves.length === 0 ? emptyRoot() : subtreeHash(leaves, 0, leaves.length);
}

/**
 * Appends leaves one at a time and gives the root of the tree so far, keeping only the roots of
 * the perfect subtrees that make up the current size (one per set bit of the size, largest first):
 * O(log n) memory, amortized O(1) hashes per append, O(log n) hashes per root.
 */
export class MerkleBuilder {
  readonly #subtrees: string[] = [];
  #size = 0;

  get size(): number {
    return this.#size;
  }

  append(data: Uint8Array): void {
    this.appendLeafDigest(leafDigest(data));
  }

  /** append for a caller that has the leaf's hash (SHA-256 of 0x00 ‖ data) already, as sha256Latin1 gives it. */
  appendLeafDigest(leaf: string): void {
    let subtree = leaf;
    // Each trailing 1 bit of the old size is a perfect subtree the new leaf completes.
    for (let size = this.#size; size % 2 === 1; size = Math.floor(size / 2)) subtree = nodeDigest(this.#subtrees.pop()!, subtree);
    this.#subtrees.push(subtree);
    this.#size += 1;
  }

  root(): Buffer {
    if (this.#subtrees.length === 0) return emptyRoot();
    let root = this.#subtrees[this.#subtrees.length - 1]!;
    for (let i = this.#subtrees.length - 2; i >= 0; i -= 1) root = nodeDigest(this.#subtrees[i]!, root);
    return Buffer.from(root, 'latin1');
  }
}
