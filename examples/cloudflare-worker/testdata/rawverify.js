// The physical limit of the host-crypto path, for bench_test.go: a worker
// that does only the one WebCrypto Ed25519 check of the bearer token (the
// key imported once per isolate from the KEY_X binding) and then forwards to
// the origin like worker.js. It checks nothing else: not for use.
let key = null;

const b64 = (s) => Uint8Array.from(atob(s.replaceAll("-", "+").replaceAll("_", "/")), (c) => c.charCodeAt(0));

export default {
  async fetch(request, env) {
    key ??= await crypto.subtle.importKey("raw", b64(env.KEY_X), { name: "Ed25519" }, false, ["verify"]);
    const token = (request.headers.get("authorization") ?? "").slice(7);
    const dot = token.lastIndexOf(".");
    const ok = await crypto.subtle.verify({ name: "Ed25519" }, key, b64(token.slice(dot + 1)),
      new TextEncoder().encode(token.slice(0, dot)));
    if (!ok) return new Response("bad signature", { status: 401 });
    return env.ORIGIN.fetch(new Request(request.url, request));
  },
};
