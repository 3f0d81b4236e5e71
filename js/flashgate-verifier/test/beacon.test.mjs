// Room beacons (../README.md#room-beacons): verifyRoomBeacon, and the admission
// Verifier (the wasm module, both signature paths) refusing a beacon.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { generateKeyPairSync, sign } from "node:crypto";

import { Verifier, verifyRoomBeacon } from "../index.js";

const wasmPath = process.env.FLASHGATE_WASM;
assert.ok(wasmPath, "set FLASHGATE_WASM to the built module (make wasm)");
const wasm = await WebAssembly.compile(await readFile(wasmPath));

const { publicKey, privateKey } = generateKeyPairSync("ed25519");
const x = publicKey.export({ format: "jwk" }).x;
const jwks = { keys: [{ kty: "OKP", crv: "Ed25519", kid: "k1", x, alg: "EdDSA", use: "sig" }] };
const b64u = (s) => Buffer.from(s).toString("base64url");
const jws = (payload, typ = "flashgate-beacon+jwt", header) => {
  const h = b64u(header ?? JSON.stringify({ alg: "EdDSA", kid: "k1", typ }));
  const p = b64u(JSON.stringify(payload));
  return `${h}.${p}.${sign(null, Buffer.from(`${h}.${p}`), privateKey).toString("base64url")}`;
};
const NOW = 1_900_000_000_000;
const s = NOW / 1000;
const beacon = (extra = {}) => ({ iss: "flashgate", room: "sku-1", iat: s, exp: s + 5, state: "open", total_waiting: 10,
  priority: 0, head: 1, tail: 10, exact_through: 0, drawn_ahead: 0, closed_through: 0, near_head: 50, buckets: [[10, 10]], ...extra });
const opts = { jwks, issuer: "flashgate", room: "sku-1", now: NOW };

test("verifyRoomBeacon accepts a beacon the key set signed, and returns its payload", async () => {
  const r = await verifyRoomBeacon(jws(beacon()), opts);
  assert.equal(r.valid, true, r.message);
  assert.equal(r.beacon.total_waiting, 10);
  assert.equal((await verifyRoomBeacon(jws(beacon()), { ...opts, room: "" })).valid, true, "any room");
  assert.equal((await verifyRoomBeacon(jws(beacon()), { ...opts, jwks: JSON.stringify(jwks) })).valid, true, "a JSON string set");
});

test("verifyRoomBeacon refuses another typ, key, issuer, room, a stale or tampered beacon", async () => {
  const cases = [
    [jws(beacon(), "flashgate-admission+jwt"), "bad_type"],
    [jws(beacon(), "fg-receipt+jwt"), "bad_type"],
    [jws(beacon(), "", JSON.stringify({ alg: "EdDSA", kid: "k1" })), "bad_type"],
    [jws(beacon(), "", JSON.stringify({ alg: "none", kid: "k1", typ: "flashgate-beacon+jwt" })), "unsupported_alg"],
    [jws(beacon(), "", JSON.stringify({ alg: "EdDSA", kid: "k2", typ: "flashgate-beacon+jwt" })), "unknown_key"],
    [jws(beacon(), "", JSON.stringify({ alg: "EdDSA", kid: "k1", typ: "flashgate-beacon+jwt", jwk: {} })), "malformed"],
    [jws(beacon({ iss: "evil" })), "bad_issuer"],
    [jws(beacon({ room: "sku-2" })), "bad_room"],
    [jws(beacon({ iat: s - 20, exp: s - 10 })), "expired"],
    [jws(beacon({ iat: s + 10, exp: s + 15 })), "not_yet_valid"],
    [jws(beacon({ exp: s + 3600 })), "lifetime_too_long"],
    [jws(beacon({ buckets: undefined })), "invalid_claims"],
    ["a.b", "malformed"],
  ];
  const good = jws(beacon());
  const [h, p, sg] = good.split(".");
  cases.push([`${h}.${b64u(JSON.stringify(beacon({ total_waiting: 1 })))}.${sg}`, "bad_signature"]);
  for (const [tok, want] of cases) {
    const r = await verifyRoomBeacon(tok, opts);
    assert.equal(r.valid, false, want);
    assert.equal(r.reason, want, r.message);
  }
  void p;
});

test("the admission Verifier (the wasm module) refuses a beacon: bad_type, on both signature paths", async () => {
  for (const crypto of ["host", "pure"]) {
    const v = await Verifier.create({ wasm, issuer: "flashgate", audience: "orders", jwks, crypto });
    // Claims an admission token would carry, so that only the typ tells them apart.
    const tok = jws(beacon({ aud: "orders", sub: "u", product: "sku-1", jti: "x" }));
    const r = await v.verify(tok, { product: "sku-1", now: NOW });
    assert.equal(r.valid, false);
    assert.equal(r.reason, "bad_type", r.message);
    assert.deepEqual(v.jwks, jwks, "the set in use, for verifyRoomBeacon");
  }
});
