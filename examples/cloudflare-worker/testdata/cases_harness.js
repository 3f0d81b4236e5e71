// Test harness for worker_test.go TestWorkerTokenCases: runs the shared token
// case table (internal/testing/tokencases/testdata/cases.json, embedded as the JSON
// module "cases.json") through the real worker.js fetch handler and its wasm
// module inside workerd, one in-process request per case, and answers
// GET /?crypto=host|pure|auto with the outcome of every case, run with that
// FLASHGATE_CRYPTO. FLASHGATE_DEBUG is on, so each outcome names the path the
// worker's Verifier checked signatures with (X-Flashgate-Crypto). cases_test.go
// compares the outcomes with the table (the same file the native and wazero
// harnesses run).
//
// Each case runs at its own clock (Date.now is replaced for the call), with
// its leeway in FLASHGATE_LEEWAY_SECONDS, its product in the path and its
// token as a Bearer token. The JWKS comes from a stub ISSUER binding and the
// origin is a stub ORIGIN binding that echoes the X-Flashgate-* headers.
// A case the worker cannot be asked over HTTP is reported as skipped, with
// the reason: worker.js never checks a user, a path always names a product,
// an empty token is "missing", spaces after "Bearer" are skipped, and a
// header value cannot carry every byte.

import worker from "./worker.js";
import table from "./cases.json";

const realNow = Date.now;

function tokenOf(c) {
  return c.token + (c.repeat ?? "").repeat(c.count ?? 0) + (c.tail ?? "");
}

// skipReason returns why c cannot be sent to the worker, or "".
function skipReason(c, token) {
  if (c.user !== "") return "worker.js does not check the user";
  if (c.product === "") return "a protected path always names a product";
  if (token === "") return "an empty token is reported as missing";
  if (token.startsWith(" ")) return "the Bearer parser skips spaces before the token";
  if (/[^\x00-\x7f]/.test(token)) return "not a header value: non-ASCII";
  let got;
  try {
    got = new Headers({ authorization: "Bearer " + token }).get("authorization");
  } catch (err) {
    return "not a header value: " + String(err);
  }
  if (got !== "Bearer " + token) return "not a header value: changed by header normalisation";
  return "";
}

async function runCase(c, crypto) {
  const token = tokenOf(c);
  const skip = skipReason(c, token);
  if (skip) return { name: c.name, skipped: skip };
  const env = {
    FLASHGATE_ISSUER: table.iss,
    FLASHGATE_AUDIENCE: table.aud,
    FLASHGATE_LEEWAY_SECONDS: String(c.leeway),
    FLASHGATE_JWKS_URL: "http://issuer/.well-known/jwks.json",
    // Token rules at fixed past times, not stops: the stub issuer serves the JWK Set only.
    FLASHGATE_DIRECTIVES_URL: "off",
    FLASHGATE_JWKS_TTL_SECONDS: "300",
    FLASHGATE_PRODUCT_PREFIX: "/products/",
    FLASHGATE_CRYPTO: crypto,
    FLASHGATE_DEBUG: "1",
    ISSUER: { fetch: async () => new Response(table.jwks, { headers: { "content-type": "application/json" } }) },
    ORIGIN: {
      fetch: async (req) =>
        new Response(
          JSON.stringify({
            sub: req.headers.get("x-flashgate-user"),
            product: req.headers.get("x-flashgate-product"),
            jti: req.headers.get("x-flashgate-admission"),
          }),
        ),
    },
  };
  const req = new Request("http://edge.test/products/" + encodeURIComponent(c.product) + "/buy", {
    headers: { authorization: "Bearer " + token, accept: "application/json" },
  });
  const ctx = { waitUntil() {}, passThroughOnException() {} };
  Date.now = () => c.now * 1000;
  let res;
  try {
    res = await worker.fetch(req, env, ctx);
  } finally {
    Date.now = realNow;
  }
  const body = await res.text();
  const out = { name: c.name, status: res.status, crypto: res.headers.get("x-flashgate-crypto") ?? "" };
  try {
    const j = JSON.parse(body);
    if (res.status === 200) out.claims = j;
    else out.reason = j.reason;
  } catch {
    out.body = body;
  }
  return out;
}

export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname !== "/") return new Response("ready", { status: 404 });
    const crypto = url.searchParams.get("crypto") ?? "auto";
    const results = [];
    for (const c of table.cases) results.push(await runCase(c, crypto));
    return new Response(JSON.stringify({ cases: table.cases.length, results }), {
      headers: { "content-type": "application/json" },
    });
  },
};
