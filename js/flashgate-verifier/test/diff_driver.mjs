// diff_driver.mjs — the package's side of differential_test.go. Run as
//
//   node test/diff_driver.mjs CASES_JSON WASM
//
// it builds three Verifiers from the case table's JWK Set, iss and aud
// (leeway 0) — crypto "host" (node:crypto in Node), crypto "host" with
// WebCrypto's crypto.subtle, and crypto "pure" — prints one line
// {ready, runtime, crypto: {host, webcrypto, pure}} (their providers), then
// answers each newline-delimited JSON request {token, product, user, now}
// (now in Unix seconds) on stdin with one line
//
//   {host: {reason, claims?, message?, error?}, webcrypto: {…}, pure: {…}}
//
// in order. It decides nothing: differential_test.go compares.
import { readFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import { Verifier } from "../index.js";

const [casesPath, wasmPath] = process.argv.slice(2);
if (!casesPath || !wasmPath) throw new Error("usage: diff_driver.mjs CASES_JSON WASM");
const table = JSON.parse(await readFile(casesPath, "utf8"));
const wasm = await readFile(wasmPath);

const options = { wasm, jwks: table.jwks, issuer: table.iss, audience: table.aud, leewaySeconds: 0 };
const verifiers = {
  host: await Verifier.create({ ...options, crypto: "host" }),
  webcrypto: await Verifier.create({ ...options, crypto: "host", subtle: globalThis.crypto.subtle }),
  pure: await Verifier.create({ ...options, crypto: "pure" }),
};

function write(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

async function answer(v, req) {
  try {
    const r = await v.verify(req.token, { product: req.product, user: req.user, now: req.now * 1000 });
    if (r.valid !== (r.reason === "ok")) return { reason: r.reason, error: `valid is ${r.valid} for ${r.reason}` };
    return r.valid ? { reason: r.reason, claims: r.claims } : { reason: r.reason, message: r.message };
  } catch (err) {
    return { reason: "", error: String(err?.stack ?? err) };
  }
}

write({
  ready: true,
  runtime: `node ${process.versions.node}`,
  crypto: { host: verifiers.host.provider, webcrypto: verifiers.webcrypto.provider, pure: verifiers.pure.provider },
});

for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line === "") continue;
  const req = JSON.parse(line);
  write({
    host: await answer(verifiers.host, req),
    webcrypto: await answer(verifiers.webcrypto, req),
    pure: await answer(verifiers.pure, req),
  });
}
