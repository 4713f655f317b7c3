import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { leafHash, MerkleBuilder, merkleRoot, nodeHash } from '../../src/crypto/merkle.js';

// The Certificate Transparency reference leaves and roots (transparency-dev/merkle,
// testonly/constants.go: LeafInputs and RootHashes, from the C++ reference tests).
const LEAVES = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'].map((hex) => Buffer.from(hex, 'hex'));
const ROOTS = [
  'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
  'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
  '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
  'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
];

describe('RFC 6962 Merkle tree hash', () => {
  it('matches the reference roots for sizes 0..8, recursively', () => {
    for (let size = 0; size <= LEAVES.length; size += 1) expect(merkleRoot(LEAVES.slice(0, size)).toString('hex'), `size ${size}`).toBe(ROOTS[size]);
  });

  it('matches the reference roots for sizes 0..8, incrementally', () => {
    const builder = new MerkleBuilder();
    expect(builder.root().toString('hex')).toBe(ROOTS[0]);
    LEAVES.forEach((leaf, index) => {
      builder.append(leaf);
      expect(builder.size).toBe(index + 1);
      expect(builder.root().toString('hex'), `size ${index + 1}`).toBe(ROOTS[index + 1]);
    });
  });

  it('prefixes leaves with 0x00 and nodes with 0x01 (reference interior nodes)', () => {
    expect(leafHash(LEAVES[1]!).toString('hex')).toBe('96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7');
    expect(nodeHash(leafHash(LEAVES[0]!), leafHash(LEAVES[1]!)).toString('hex')).toBe(ROOTS[2]);
  });

  it('the builder agrees with the recursive definition at every size', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 8 }), { maxLength: 70 }), (leaves) => {
        const builder = new MerkleBuilder();
        for (let size = 1; size <= leaves.length; size += 1) {
          builder.append(leaves[size - 1]!);
          expect(builder.root().equals(merkleRoot(leaves.slice(0, size)))).toBe(true);
        }
      }),
    );
  });

  it('no longer gives the root when any leaf changes or two leaves trade places', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.uint8Array({ minLength: 1, maxLength: 4 }), { minLength: 2, maxLength: 20, selector: (a) => Buffer.from(a).toString('hex') }), fc.nat(), fc.nat(), (leaves, a, b) => {
        const i = a % leaves.length;
        const j = (i + 1 + (b % (leaves.length - 1))) % leaves.length;
        const root = merkleRoot(leaves);
        const edited = leaves.map((leaf, k) => (k === i ? Buffer.concat([leaf, Buffer.from([0])]) : leaf));
        const swapped = leaves.map((leaf, k) => (k === i ? leaves[j]! : k === j ? leaves[i]! : leaf));
        expect(merkleRoot(edited).equals(root)).toBe(false);
        expect(merkleRoot(swapped).equals(root)).toBe(false);
      }),
    );
  });
});
