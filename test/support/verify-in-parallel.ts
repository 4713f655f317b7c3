/** Verifies a chain large enough for the shared digest workers, prints the report and ends: the process must exit by itself. */
import { verifyChainParallel } from '../../src/audit/verify.js';
import { generateAnchorKey, loadAnchorKey } from '../../src/crypto/checkpoint.js';
import { chain, hmacKeys, projectId } from './audit-chains.js';

const entries = chain(Number(process.argv[2]), true);
const report = await verifyChainParallel({ projectId, entries, checkpoints: [], hmacKeys, anchorPublicKey: loadAnchorKey(generateAnchorKey()).publicKey, verifiedAt: '2025-02-01T00:00:00.000Z' });
console.log(JSON.stringify(report));
