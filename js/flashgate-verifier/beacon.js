// The drand beacon check of the pre-queue lottery (docs/rooms.md#the-draw-bit-for-bit, step 4):
// a round of an unchained chain that signs on G1 (quicknet, bls-unchained-g1-rfc9380) verified
// against the chain's public key with @noble/curves (audited BLS12-381). verifyReceipt loads this
// module only for a room whose draw uses a beacon.
import { bls12_381 } from "@noble/curves/bls12-381.js";

/** The League of Entropy's quicknet chain: the key a checker pins, whatever a room view says. */
export const QUICKNET = Object.freeze({
  hash: "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971",
  public_key:
    "83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d1fec758c921cc22b0e17e63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a",
  genesis_time: 1692803367,
  period: 3,
});

const DST = "BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_";

function bytes(hex) {
  if (typeof hex !== "string" || hex.length % 2 || !/^[0-9a-f]*$/.test(hex)) return null;
  const b = new Uint8Array(hex.length / 2);
  for (let i = 0; i < b.length; i++) b[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return b;
}

/**
 * Whether signatureHex is chain's BLS signature of round (e(sig, g2) = e(H(SHA-256(round as 8
 * bytes big-endian)), pk)). chain: {hash, public_key}; quicknet's key is used for quicknet's hash.
 */
export async function verifyBeacon(chain, round, signatureHex) {
  const pk = bytes(chain && chain.hash === QUICKNET.hash ? QUICKNET.public_key : chain && chain.public_key);
  const sig = bytes(signatureHex);
  if (!pk || !sig || sig.length !== 48 || !Number.isSafeInteger(round) || round < 1) return false;
  const r = new Uint8Array(8);
  new DataView(r.buffer).setBigUint64(0, BigInt(round));
  const msg = new Uint8Array(await globalThis.crypto.subtle.digest("SHA-256", r));
  const bls = bls12_381.shortSignatures;
  try {
    return bls.verify(sig, bls.hash(msg, DST), pk);
  } catch {
    return false;
  }
}
