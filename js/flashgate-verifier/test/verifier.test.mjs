// Node tests of flashgate-verifier (run by package_test.go with
// FLASHGATE_WASM set to the built module; `node --test test/` by hand).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile, mkdtemp, copyFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { webcrypto } from "node:crypto";

import { Verifier, VerifierError, REASONS, ABI_VERSION, PROBLEMS, hostCryptoAvailable, refusal } from "../index.js";

const wasmPath = process.env.FLASHGATE_WASM;
assert.ok(wasmPath, "set FLASHGATE_WASM to the built module (make wasm)");
const wasmBytes = await readFile(wasmPath);
const wasm = await WebAssembly.compile(wasmBytes);
const set = JSON.parse(await readFile(new URL("../../../internal/testing/tokencases/testdata/cases.json", import.meta.url)));

const tokenOf = (c) => c.token + (c.repeat ? c.repeat.repeat(c.count) : "") + (c.tail ?? "");
const validCase = set.cases.find((c) => c.name === "valid");
const NOW = validCase.now * 1000;
const base = { wasm, issuer: set.iss, audience: set.aud };

// runTable verifies every case with a Verifier per leeway and returns the
// disagreements with the golden want (reason and claims).
async function runTable(mode, provider, extra = {}) {
  const byLeeway = new Map();
  const bad = [];
  for (const c of set.cases) {
    let v = byLeeway.get(c.leeway);
    if (!v) {
      v = await Verifier.create({ ...base, jwks: set.jwks, leewaySeconds: c.leeway, crypto: mode, ...extra });
      assert.equal(v.crypto, mode);
      assert.equal(v.provider, provider);
      byLeeway.set(c.leeway, v);
    }
    const r = await v.verify(tokenOf(c), { product: c.product, user: c.user, now: c.now * 1000 });
    if (r.reason !== c.want || r.valid !== (c.want === "ok")) {
      bad.push(`${c.name}: ${r.reason} (${r.message}), want ${c.want}`);
    } else if (c.want_claims && JSON.stringify(r.claims) !== JSON.stringify(c.want_claims)) {
      bad.push(`${c.name}: claims ${JSON.stringify(r.claims)}, want ${JSON.stringify(c.want_claims)}`);
    }
  }
  return bad;
}

test("the module speaks this package's ABI; the reason table is the golden one", () => {
  assert.equal(ABI_VERSION, 2);
  assert.deepEqual([...REASONS], set.code_names);
});

test("Node has WebCrypto Ed25519 (the host path is tested, not skipped)", async () => {
  assert.equal(await hostCryptoAvailable(), true);
});

for (const [mode, provider, extra] of [
  ["host", "node:crypto", {}],
  ["host", "webcrypto", { subtle: globalThis.crypto.subtle }],
  ["pure", "wasm", {}],
]) {
  test(`case table, ${mode} crypto (${provider}): every case as the golden file says`, async () => {
    const bad = await runTable(mode, provider, extra);
    assert.deepEqual(bad, [], `${bad.length} of ${set.cases.length} cases disagree`);
  });
}

test("auto picks the host's Ed25519 in Node: node:crypto (synchronous), WebCrypto when asked", async () => {
  const v = await Verifier.create({ ...base, jwks: set.jwks });
  assert.equal(v.crypto, "host");
  assert.equal(v.provider, "node:crypto");
  const w = await Verifier.create({ ...base, jwks: set.jwks, subtle: globalThis.crypto.subtle });
  assert.equal(w.provider, "webcrypto");
});

test("the host's answer is used: a WebCrypto that refuses every signature makes a valid token bad_signature", async () => {
  const refusing = {
    importKey: (...a) => webcrypto.subtle.importKey(...a),
    verify: async (alg, key, sig, data) => {
      // Pass the probe (RFC 8032 TEST 1, empty message), refuse the rest.
      if (data.byteLength === 0) return webcrypto.subtle.verify(alg, key, sig, data);
      return false;
    },
  };
  const v = await Verifier.create({ ...base, jwks: set.jwks, crypto: "host", subtle: refusing });
  const r = await v.verify(validCase.token, { product: validCase.product, now: NOW });
  assert.equal(r.reason, "bad_signature");
  // Precedence stays the module's: an expired token is still bad_signature.
  const r2 = await v.verify(validCase.token, { product: validCase.product, now: NOW + 3600_000 });
  assert.equal(r2.reason, "bad_signature");
});

test("a WebCrypto that throws falls back to the module's Ed25519, same answers", async () => {
  let calls = 0;
  const throwing = {
    importKey: (...a) => webcrypto.subtle.importKey(...a),
    verify: async (alg, key, sig, data) => {
      if (data.byteLength === 0) return webcrypto.subtle.verify(alg, key, sig, data);
      calls++;
      throw new Error("host crypto failed");
    },
  };
  const v = await Verifier.create({ ...base, jwks: set.jwks, crypto: "host", subtle: throwing });
  const ok = await v.verify(validCase.token, { product: validCase.product, now: NOW });
  assert.equal(ok.reason, "ok");
  const forged = set.cases.find((c) => c.want === "bad_signature" && c.leeway === 0);
  const r = await v.verify(tokenOf(forged), { product: forged.product, user: forged.user, now: forged.now * 1000 });
  assert.equal(r.reason, "bad_signature");
  assert.ok(calls >= 2);
});

test("crypto: host without Ed25519 in WebCrypto is refused at create", async () => {
  const none = { importKey: async () => { throw new Error("NotSupportedError"); }, verify: async () => false };
  await assert.rejects(Verifier.create({ ...base, jwks: set.jwks, crypto: "host", subtle: none }),
    (e) => e instanceof VerifierError && e.code === "bad_options" && /Ed25519/.test(e.message));
  const auto = await Verifier.create({ ...base, jwks: set.jwks, subtle: none });
  assert.equal(auto.crypto, "pure");
  assert.equal(auto.provider, "wasm");
  assert.equal((await auto.verify(validCase.token, { product: validCase.product, now: NOW })).reason, "ok");
});

test("more verifications in flight than the module has slots (256): every one answered right", async () => {
  // WebCrypto: asynchronous, so all 600 are begun before the first finishes.
  const v = await Verifier.create({ ...base, jwks: set.jwks, crypto: "host", subtle: globalThis.crypto.subtle });
  const forged = validCase.token.slice(0, -2) + (validCase.token.endsWith("AA") ? "BA" : "AA");
  const results = await Promise.all(Array.from({ length: 600 }, (_, i) =>
    v.verify(i % 3 === 0 ? forged : validCase.token, { product: validCase.product, now: NOW })));
  results.forEach((r, i) => assert.equal(r.reason, i % 3 === 0 ? "bad_signature" : "ok", `verification ${i}`));
});

test("claims, user and product checks", async () => {
  const v = await Verifier.create({ ...base, jwks: set.jwks, product: validCase.product });
  const r = await v.verify(validCase.token, { now: new Date(NOW) });
  assert.equal(r.valid, true);
  assert.deepEqual(r.claims, validCase.want_claims);
  const sub = validCase.want_claims.sub;
  assert.equal((await v.verify(validCase.token, { user: sub, now: NOW })).reason, "ok");
  assert.equal((await v.verify(validCase.token, { user: sub + "x", now: NOW })).reason, "bad_user");
  assert.equal((await v.verify(validCase.token, { product: "other", now: NOW })).reason, "bad_product");
  const expired = await v.verify(validCase.token, { now: (validCase.want_claims.exp + 1) * 1000 });
  assert.equal(expired.valid, false);
  assert.equal(expired.reason, "expired");
  assert.equal(typeof expired.message, "string");
});

test("bad options are clear errors", async () => {
  const cases = [
    [{ ...base, jwks: set.jwks, issuer: "" }, /issuer is required/],
    [{ ...base, jwks: set.jwks, audience: undefined }, /audience is required/],
    [{ ...base }, /exactly one of jwks and jwksUrl/],
    [{ ...base, jwks: set.jwks, jwksUrl: "https://x" }, /exactly one of jwks and jwksUrl/],
    [{ ...base, jwks: set.jwks, audience: "orders\nleeway=60" }, /line break/],
    [{ ...base, jwks: set.jwks, crypto: "fast" }, /crypto must be/],
    [{ ...base, jwks: set.jwks, leewaySeconds: 1.5 }, /leewaySeconds/],
    [{ ...base, jwks: set.jwks, wasm: 42 }, /wasm must be/],
  ];
  for (const [opts, re] of cases) {
    await assert.rejects(Verifier.create(opts), (e) => e instanceof VerifierError && e.code === "bad_options" && re.test(e.message), String(re));
  }
  // Range checks are the module's (configure): leeway over 60 s.
  await assert.rejects(Verifier.create({ ...base, jwks: set.jwks, leewaySeconds: 61 }),
    (e) => e instanceof VerifierError && e.code === "bad_config");
  await assert.rejects(Verifier.create({ ...base, jwks: '{"keys":[]}' }),
    (e) => e instanceof VerifierError && e.code === "bad_keys");
  const v = await Verifier.create({ ...base, jwks: set.jwks });
  await assert.rejects(v.verify(validCase.token, { product: validCase.product, now: validCase.now }), /milliseconds since the epoch/);
  await assert.rejects(v.verify(42), /token must be a string/);
});

test("a module of another ABI is refused", async () => {
  // (module (memory (export "memory") 1) (func (export "abi_version") (result i32) i32.const 1))
  const v1 = new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, // type: () -> i32
    0x03, 0x02, 0x01, 0x00, // function 0: type 0
    0x05, 0x03, 0x01, 0x00, 0x01, // memory: min 1
    0x07, 0x18, 0x02,
    0x0b, ...new TextEncoder().encode("abi_version"), 0x00, 0x00,
    0x06, ...new TextEncoder().encode("memory"), 0x02, 0x00,
    0x0a, 0x06, 0x01, 0x04, 0x00, 0x41, 0x01, 0x0b, // code: i32.const 1
  ]);
  await assert.rejects(Verifier.create({ ...base, jwks: set.jwks, wasm: v1 }),
    (e) => e instanceof VerifierError && e.code === "bad_module" && /ABI 1/.test(e.message));
});

test("the module loads from bytes, a URL, a Response and by default next to index.js", async () => {
  for (const src of [wasmBytes, new URL(`file://${wasmPath}`), new Response(wasmBytes)]) {
    const v = await Verifier.create({ ...base, wasm: src, jwks: set.jwks });
    assert.equal((await v.verify(validCase.token, { product: validCase.product, now: NOW })).reason, "ok");
  }
  // The default: flashgate-verifier.wasm beside index.js, as npm installs it.
  const dir = await mkdtemp(join(tmpdir(), "flashgate-verifier-"));
  try {
    await copyFile(new URL("../index.js", import.meta.url), join(dir, "index.js"));
    await copyFile(wasmPath, join(dir, "flashgate-verifier.wasm"));
    const pkg = await import(pathToFileURL(join(dir, "index.js")));
    const v = await pkg.Verifier.create({ issuer: set.iss, audience: set.aud, jwks: set.jwks });
    assert.equal((await v.verify(validCase.token, { product: validCase.product, now: NOW })).reason, "ok");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("oversized tokens are too_large (the copy is bounded), not a crash", async () => {
  const v = await Verifier.create({ ...base, jwks: set.jwks });
  for (const n of [4097, 64 << 10, 1 << 20]) {
    assert.equal((await v.verify("a".repeat(n), { product: "p", now: NOW })).reason, "too_large", `${n} bytes`);
  }
});

// ---- remote JWK Set ------------------------------------------------------------

// keyServer is a fake fetch serving a JWK Set built from the golden keys.
function keyServer(jwks, { maxAge } = {}) {
  const s = {
    jwks,
    calls: 0,
    fail: false,
    maxAge,
    gate: null, // a Promise every fetch waits for
    fetch: async (url, init) => {
      s.calls++;
      assert.equal(url, "https://issuer.example/.well-known/jwks.json");
      assert.match(init.headers.accept, /application\/jwk-set\+json/);
      if (s.gate) await s.gate;
      if (s.fail) return new Response("down", { status: 503 });
      const headers = { "content-type": "application/jwk-set+json" };
      if (s.maxAge !== undefined) headers["cache-control"] = `public, max-age=${s.maxAge}`;
      return new Response(s.jwks, { headers });
    },
  };
  return s;
}

// Two JWK Sets from the golden one: only the previous key, and both.
const goldenKeys = JSON.parse(set.jwks).keys;
const onlyPrevious = JSON.stringify({ keys: goldenKeys.filter((k) => k.kid === set.keys.previous.kid) });
const both = set.jwks;

function fakeClock(start = 1_000_000) {
  const c = { t: start, now: () => c.t };
  return c;
}

function remote(server, clock, extra = {}) {
  return Verifier.create({ ...base, jwksUrl: "https://issuer.example/.well-known/jwks.json", fetch: server.fetch, clock: clock.now, ...extra });
}

const current = { token: validCase.token, opts: { product: validCase.product, now: NOW } };

test("jwksUrl: fetched at create; an unknown kid refreshes once, 50 concurrent lookups share one fetch", async () => {
  const srv = keyServer(onlyPrevious);
  const clock = fakeClock();
  const v = await remote(srv, clock);
  assert.equal(srv.calls, 1);
  assert.equal(v.keysFetches, 1);
  // The valid token is signed by the current key, which the set lacks.
  clock.t += 10_000;
  srv.jwks = both; // the issuer rotated
  let open;
  srv.gate = new Promise((r) => (open = r));
  const pending = Array.from({ length: 50 }, () => v.verify(current.token, current.opts));
  await new Promise((r) => setTimeout(r, 10));
  open();
  const rs = await Promise.all(pending);
  rs.forEach((r) => assert.equal(r.reason, "ok"));
  assert.equal(srv.calls, 2, "one refresh for 50 unknown-kid lookups (joined the due one in flight)");
});

test("jwksUrl: at most one forced refresh per minRefreshIntervalMs, however many unknown kids", async () => {
  const srv = keyServer(onlyPrevious, { maxAge: 3600 });
  const clock = fakeClock();
  const v = await remote(srv, clock, { minRefreshIntervalMs: 10_000 });
  clock.t += 1_000;
  // Right after create's fetch: an unknown kid still forces one refresh (a rotation).
  assert.equal((await v.verify(current.token, current.opts)).reason, "unknown_key");
  assert.equal(srv.calls, 2);
  clock.t += 9_999;
  assert.equal((await v.verify(current.token, current.opts)).reason, "unknown_key");
  assert.equal(srv.calls, 2, "no second forced fetch inside the floor");
  clock.t += 1;
  srv.jwks = both;
  assert.equal((await v.verify(current.token, current.opts)).reason, "ok");
  assert.equal(srv.calls, 3);
});

test("jwksUrl: refreshed Cache-Control max-age after a fetch, not before", async () => {
  const srv = keyServer(both, { maxAge: 60 });
  const clock = fakeClock();
  const v = await remote(srv, clock);
  clock.t += 59_999;
  await v.verify(current.token, current.opts);
  assert.equal(srv.calls, 1);
  clock.t += 1;
  await v.verify(current.token, current.opts);
  assert.equal(srv.calls, 2);
});

test("jwksUrl: a failed or rejected refresh keeps the keys in use", async () => {
  const srv = keyServer(both, { maxAge: 60 });
  const clock = fakeClock();
  const v = await remote(srv, clock);
  clock.t += 60_000;
  srv.fail = true;
  assert.equal((await v.verify(current.token, current.opts)).reason, "ok");
  assert.match(String(v.keysError), /HTTP 503/);
  clock.t += 10_000;
  srv.fail = false;
  // A set with a private member is refused whole (verifier.ParseJWKS).
  srv.jwks = JSON.stringify({ keys: goldenKeys.map((k) => ({ ...k, d: "AAAA" })) });
  assert.equal((await v.verify(current.token, current.opts)).reason, "ok");
  assert.equal(srv.calls, 3);
  assert.ok(v.keysError instanceof VerifierError);
});

test("jwksUrl: no keys yet → keys_unavailable, create still resolves, retried after the floor", async () => {
  const srv = keyServer(both);
  srv.fail = true;
  const clock = fakeClock();
  const v = await remote(srv, clock);
  const r = await v.verify(current.token, current.opts);
  assert.equal(r.valid, false);
  assert.equal(r.reason, "keys_unavailable");
  assert.match(r.message, /HTTP 503/);
  const calls = srv.calls;
  assert.equal((await v.verify(current.token, current.opts)).reason, "keys_unavailable");
  assert.equal(srv.calls, calls, "no fetch storm while the issuer is down");
  clock.t += 10_000;
  srv.fail = false;
  assert.equal((await v.verify(current.token, current.opts)).reason, "ok");
});

test("refusal: the problem document and headers of PROBLEMS", async () => {
  for (const reason of [...REASONS.slice(1), "missing"]) assert.ok(PROBLEMS[reason], reason);
  const r = refusal("bad_product", "for sku-2");
  assert.equal(r.status, 403);
  assert.equal(r.headers.get("content-type"), "application/problem+json");
  assert.equal(r.headers.get("cache-control"), "no-store");
  assert.equal(r.headers.get("www-authenticate"), 'Bearer error="insufficient_scope"');
  assert.deepEqual(await r.json(), {
    type: "https://flashgate.dev/problems/token-bad-product",
    title: "Admission token for another product", status: 403, reason: "bad_product", detail: "for sku-2",
  });
  const u = refusal("keys_unavailable");
  assert.equal(u.status, 503);
  assert.equal(u.headers.get("retry-after"), "1");
  assert.equal(u.headers.get("www-authenticate"), null);
  assert.equal(refusal("missing").headers.get("www-authenticate"), "Bearer");
});

// ---- edge directives -----------------------------------------------------------

// directiveServer is a fake fetch serving the issuer's directive document.
function directiveServer(rooms, maxAge = 5) {
  const s = {
    rooms,
    calls: 0,
    fail: false,
    fetch: async (url, init) => {
      s.calls++;
      assert.equal(url, "https://issuer.example/.well-known/flashgate-directives.json");
      assert.equal(init.headers.accept, "application/json");
      if (s.fail) return new Response("down", { status: 503 });
      return new Response(JSON.stringify({ rooms: s.rooms }), { headers: { "content-type": "application/json", "cache-control": `public, max-age=${maxAge}` } });
    },
  };
  return s;
}

test("directivesUrl: refused before any document; a stop refuses older tokens one fetch after max-age; a failed fetch keeps the last document", async () => {
  const srv = directiveServer({});
  srv.fail = true;
  const clock = fakeClock();
  const v = await Verifier.create({ ...base, jwks: set.jwks, directivesUrl: "https://issuer.example/.well-known/flashgate-directives.json", fetch: srv.fetch, clock: clock.now });
  const iat = JSON.parse(Buffer.from(validCase.token.split(".")[1], "base64url")).iat;
  const product = validCase.product;
  let r = await v.verify(current.token, current.opts);
  assert.equal(r.reason, "directives_unavailable", "never fail open");
  assert.equal(srv.calls, 1, "no retry inside directivesRetryMs");

  srv.fail = false;
  clock.t += 1_000;
  assert.equal((await v.verify(current.token, current.opts)).reason, "ok");
  assert.equal(srv.calls, 2);

  srv.rooms = { [product]: { not_before: iat + 1 }, other: { not_before: 1 } };
  clock.t += 4_999;
  assert.equal((await v.verify(current.token, current.opts)).reason, "ok", "inside max-age: the cached document");
  clock.t += 1;
  r = await v.verify(current.token, current.opts);
  assert.equal(r.reason, "room_stopped");
  assert.equal(r.valid, false);
  assert.equal(srv.calls, 3);
  assert.deepEqual(PROBLEMS.room_stopped, { status: 503, title: "Waiting room stopped", challenge: "", retryAfter: 5 });

  srv.fail = true;
  clock.t += 10_000;
  assert.equal((await v.verify(current.token, current.opts)).reason, "room_stopped", "the last document stays in use");
  const n = srv.calls;
  assert.equal((await v.verify(current.token, current.opts)).reason, "room_stopped");
  assert.equal(srv.calls, n, "no fetch inside directivesRetryMs, and no wait");
  assert.ok(v.directivesError);

  srv.fail = false;
  srv.rooms = { [product]: { not_before: iat } };
  clock.t += 1_000;
  await v.refreshDirectives();
  assert.equal((await v.verify(current.token, current.opts)).reason, "ok", "iat == not_before passes");
  assert.equal(v.directivesError, null);
});
