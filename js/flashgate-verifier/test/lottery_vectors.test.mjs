// The pre-queue lottery's test vectors (testdata/lottery-vectors.json, docs/rooms.md "The draw,
// bit for bit") recomputed by the package's own functions, in Node: an independent checker of
// the Go implementation (issuer/lottery_vectors_test.go checks the same file).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createHmac } from "node:crypto";
import {
  lotteryCommitment,
  entrantLeaf,
  entrantDigest,
  lotterySeed,
  beaconRandomness,
  lotteryPlace,
} from "../index.js";

const v = JSON.parse(readFileSync(new URL("../../../testdata/lottery-vectors.json", import.meta.url)));

test("lottery vectors: secret, commitment, entrants, seed, places", async () => {
  const secret = createHmac("sha256", Buffer.from(v.key_utf8, "utf8"))
    .update(`flashgate lottery secret v2\0${v.room}\0${v.epoch}`)
    .digest("hex")
    .slice(0, 32);
  assert.equal(secret, v.secret);
  assert.equal(await lotteryCommitment(v.room, v.epoch, v.secret), v.commitment);
  for (const e of v.entrants) assert.equal(await entrantLeaf(v.room, v.epoch, e.arrival, e.user), e.leaf);
  const digest = await entrantDigest(v.room, v.epoch, v.entrants.map((e) => ({ seq: e.arrival, user: e.user })));
  assert.equal(digest, v.entrant_digest);
  for (const [name, d] of Object.entries(v.draws)) {
    const rnd = d.beacon_round > 0 ? await beaconRandomness(d.beacon_signature) : "";
    assert.equal(rnd, d.randomness, name);
    const seed = await lotterySeed(v.room, v.epoch, v.secret, rnd, digest);
    assert.equal(seed, d.seed, name);
    for (let s = 1; s <= v.cutoff; s++) {
      assert.equal(await lotteryPlace(seed, v.epoch, v.cutoff, s), d.places[String(s)], `${name}: arrival ${s}`);
    }
  }
});

test("quicknet rounds verify with the pinned key; a shifted round or changed signature does not", async () => {
  const { verifyBeacon, QUICKNET } = await import("../beacon.js");
  const q = JSON.parse(readFileSync(new URL("../../../testdata/drand-quicknet.json", import.meta.url)));
  assert.deepEqual({ ...QUICKNET }, q.chain);
  for (const r of q.rounds) {
    assert.equal(await verifyBeacon(q.chain, r.round, r.signature), true, `round ${r.round}`);
    assert.equal(await beaconRandomness(r.signature), r.randomness);
    assert.equal(await verifyBeacon(q.chain, r.round + 1, r.signature), false);
    const flipped = r.signature.slice(0, 20) + (r.signature[20] === "0" ? "1" : "0") + r.signature.slice(21);
    assert.equal(await verifyBeacon(q.chain, r.round, flipped), false);
  }
});
