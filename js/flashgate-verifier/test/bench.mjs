// Benchmark of flashgate-verifier in Node (run by bench_test.go): the
// package on both paths, the host path both with node:crypto (the default in
// Node) and with WebCrypto, each next to the host's raw Ed25519 verify of
// the same key, signature and input (the physical limit of that path).
// Prints one JSON object.
//
//   node test/bench.mjs <module.wasm> [verifies]
import { readFile } from "node:fs/promises";
import nodeCrypto from "node:crypto";
import { Verifier } from "../index.js";

const [wasmPath, nArg] = process.argv.slice(2);
const N = Number(nArg ?? 5000);
const wasm = await WebAssembly.compile(await readFile(wasmPath));
const set = JSON.parse(await readFile(new URL("../../../internal/testing/tokencases/testdata/cases.json", import.meta.url)));
const c = set.cases.find((x) => x.name === "valid");
const opts = { product: c.product, now: c.now * 1000 };

// measure runs n operations with `inflight` of them outstanding at once and
// returns wall and CPU (all threads of the process) µs per operation.
async function measure(op, n, inflight) {
  let i = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: inflight }, async () => {
    while (i++ < n) await op();
  }));
  const wall = ((performance.now() - t0) * 1000) / n;
  const cpu = process.cpuUsage(cpu0);
  return { wall_us: wall, cpu_us: (cpu.user + cpu.system) / n };
}

const host = await Verifier.create({ wasm, jwks: set.jwks, issuer: set.iss, audience: set.aud, crypto: "host" });
const web = await Verifier.create({ wasm, jwks: set.jwks, issuer: set.iss, audience: set.aud, crypto: "host", subtle: crypto.subtle });
const pure = await Verifier.create({ wasm, jwks: set.jwks, issuer: set.iss, audience: set.aud, crypto: "pure" });
if (host.provider !== "node:crypto" || web.provider !== "webcrypto" || pure.provider !== "wasm") {
  throw new Error(`providers ${host.provider} ${web.provider} ${pure.provider}`);
}
const check = (r) => { if (!r.valid) throw new Error(`refused: ${r.reason}`); };

// The raw host operation: the same key, signature and signing input.
const [h, p, s] = c.token.split(".");
const b64 = (x) => Uint8Array.from(atob(x.replaceAll("-", "+").replaceAll("_", "/")), (ch) => ch.charCodeAt(0));
const jwk = JSON.parse(set.jwks).keys.find((k) => k.kid === c.want_claims.kid);
const key = await crypto.subtle.importKey("raw", b64(jwk.x), { name: "Ed25519" }, false, ["verify"]);
const sig = b64(s);
const input = new TextEncoder().encode(`${h}.${p}`);
const raw = async () => { if (!(await crypto.subtle.verify({ name: "Ed25519" }, key, sig, input))) throw new Error("raw verify failed"); };
const nodeKey = nodeCrypto.createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: jwk.x }, format: "jwk" });
const rawNode = async () => { if (!nodeCrypto.verify(null, input, nodeKey, sig)) throw new Error("raw node verify failed"); };

const ops = {
  host_node: [async () => check(await host.verify(c.token, opts)), 1],
  raw_node: [rawNode, 1],
  host_web16: [async () => check(await web.verify(c.token, opts)), 16],
  raw_web16: [raw, 16],
  pure: [async () => check(await pure.verify(c.token, opts)), 1],
};
// Warm up, then interleave three rounds and keep the medians.
for (const [op, inflight] of Object.values(ops)) await measure(op, 500, inflight);
const rounds = {};
for (let r = 0; r < 3; r++) {
  for (const [name, [op, inflight]] of Object.entries(ops)) {
    (rounds[name] ??= []).push(await measure(op, name === "pure" ? Math.ceil(N / 5) : N, inflight));
  }
}
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const out = { runtime: `node ${process.versions.node}`, openssl: process.versions.openssl, verifies: N };
for (const [name, rs] of Object.entries(rounds)) {
  out[name] = { wall_us: median(rs.map((x) => x.wall_us)), cpu_us: median(rs.map((x) => x.cpu_us)) };
}
console.log(JSON.stringify(out));
