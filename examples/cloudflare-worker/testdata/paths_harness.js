// Test harness for paths_test.go TestWorkerPathSpellingsOriginURL: runs the
// path spellings through the real worker.js fetch handler inside workerd with
// no ORIGIN binding and FLASHGATE_ORIGIN_URL set, so the worker forwards with
// the global fetch (stubbed here: it records the URL and the verified
// product). POST / with {"jwks": <JWK Set text>, "requests": [{"path", "token"}]}
// answers [{status, reason, fetched, product}] in order ("fetched" is ""
// when nothing reached the origin).

import worker from "./worker.js";

const ORIGIN_URL = "http://origin.test/base/";

async function run(req, jwks) {
  let fetched = "";
  let product = "";
  const env = {
    FLASHGATE_ISSUER: "flashgate",
    FLASHGATE_AUDIENCE: "orders",
    FLASHGATE_JWKS_URL: "http://issuer/.well-known/jwks.json",
    // Paths, not stops: the stub issuer serves the JWK Set only.
    FLASHGATE_DIRECTIVES_URL: "off",
    FLASHGATE_PRODUCT_PREFIX: "/products/",
    FLASHGATE_ORIGIN_URL: ORIGIN_URL,
    ISSUER: { fetch: async () => new Response(jwks, { headers: { "content-type": "application/json" } }) },
  };
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (r) => {
    fetched = r.url;
    product = r.headers.get("x-flashgate-product") ?? "";
    return new Response("origin ok");
  };
  let res;
  try {
    const headers = { accept: "application/json" };
    if (req.token) headers.authorization = "Bearer " + req.token;
    // As workerd builds request.url: the Host header, then the target
    // (an absolute-form target's own authority is dropped; see paths.json).
    const url = "http://edge.test" + (req.path.startsWith("http://") ? req.path.replace(/^http:\/\/[^/]*/, "") : req.path);
    // Not a Request: its constructor would parse the URL (removing dot
    // segments, turning "\" into "/"), and workerd hands the worker the
    // target as the client spelled it. The worker reads url, method and
    // headers, and passes the object to new Request as its init.
    res = await worker.fetch({ url, method: "GET", headers: new Headers(headers), body: null }, env, {});
  } finally {
    globalThis.fetch = realFetch;
  }
  const body = await res.text();
  let reason = "";
  try {
    reason = JSON.parse(body).reason ?? "";
  } catch {
    // the origin's text
  }
  return { status: res.status, reason, fetched, product };
}

export default {
  async fetch(request) {
    if (request.method !== "POST") return new Response("ready", { status: 404 });
    const { jwks, requests } = await request.json();
    const out = [];
    for (const r of requests) out.push(await run(r, jwks));
    return new Response(JSON.stringify(out), { headers: { "content-type": "application/json" } });
  },
};
