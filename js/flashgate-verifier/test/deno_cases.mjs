// deno_cases.mjs — runs the whole token case table through the package in
// Deno, on both crypto paths. Run by deno_test.go:
//
//   deno run --allow-read=… test/deno_cases.mjs CASES_JSON WASM
//
// CASES_JSON is internal/testing/tokencases/testdata/cases.json, WASM the module. It
// prints one JSON document on stdout:
//
//   {runtime, crypto: {host, pure, auto}, subtleVerifyCalls: {host, pure},
//    results: [{name, host: {reason, claims?, message?, error?}, pure: {…}}]}
//
// and decides nothing: deno_test.go compares the results with the table's
// expectations and the two paths with each other.
import { Verifier } from "../index.js";

const [casesPath, wasmPath] = Deno.args;
if (!casesPath || !wasmPath) throw new Error("usage: deno_cases.mjs CASES_JSON WASM");
const table = JSON.parse(await Deno.readTextFile(casesPath));
const wasm = await Deno.readFile(wasmPath);

// Count WebCrypto signature checks: the host path must really use them.
let hostVerifyCalls = 0;
const subtleVerify = SubtleCrypto.prototype.verify;
SubtleCrypto.prototype.verify = function (...args) {
  hostVerifyCalls++;
  return subtleVerify.apply(this, args);
};

// One Verifier per (crypto path, leeway): the table's configuration is
// iss/aud of the table plus the case's leeway.
const verifiers = new Map();
function verifier(crypto, leeway) {
  const key = `${crypto}/${leeway}`;
  if (!verifiers.has(key)) {
    verifiers.set(
      key,
      Verifier.create({
        wasm,
        jwks: table.jwks,
        issuer: table.iss,
        audience: table.aud,
        leewaySeconds: leeway,
        crypto,
      }),
    );
  }
  return verifiers.get(key);
}

async function run(crypto, c, token) {
  try {
    const v = await verifier(crypto, c.leeway);
    const r = await v.verify(token, { product: c.product, user: c.user, now: c.now * 1000 });
    if (r.valid !== (r.reason === "ok")) return { reason: r.reason, error: `valid is ${r.valid} for ${r.reason}` };
    return r.valid ? { reason: r.reason, claims: r.claims } : { reason: r.reason, message: r.message };
  } catch (err) {
    return { reason: "", error: String(err?.stack ?? err) };
  }
}

// The host-crypto probe runs once per realm, at the first host create:
// count from after it.
const crypto = {
  host: (await verifier("host", 0)).crypto,
  pure: (await verifier("pure", 0)).crypto,
  auto: (await verifier("auto", 0)).crypto,
};
const results = [];
const calls = { host: 0, pure: 0 };
for (const c of table.cases) {
  const token = c.token + (c.repeat ?? "").repeat(c.count ?? 0) + (c.tail ?? "");
  const r = { name: c.name };
  for (const path of ["host", "pure"]) {
    const before = hostVerifyCalls;
    r[path] = await run(path, c, token);
    calls[path] += hostVerifyCalls - before;
  }
  results.push(r);
}
console.log(JSON.stringify({ runtime: `deno ${Deno.version.deno}, v8 ${Deno.version.v8}`, crypto, subtleVerifyCalls: calls, results }));
