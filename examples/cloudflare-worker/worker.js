// flashgate edge verifier — a Cloudflare Worker (ES module syntax) that guards
// /products/<product>/… with flashgate admission tokens.
//
// Every verification rule lives in the TinyGo-built wasm module (package
// verifier, ABI version 1: wasm/README.md). This file is plumbing only:
// strings in and out of linear memory, the JWKS fetch and cache, the
// result-code → name table, and the HTTP answers. See README.md in this folder.

import wasmModule from "./flashgate-verifier.wasm";

// ABI version this file speaks (wasm/main_tinygo.go abiVersion).
const ABI_VERSION = 1;

// Result codes of verify, by number: a copy of verifier/errors.go codeNames.
// Codes are stable (never renumbered), new ones are appended.
const CODE_NAMES = [
  "ok", // 0
  "too_large", // 1
  "malformed", // 2
  "duplicate_key", // 3
  "unsupported_alg", // 4
  "forbidden_header", // 5
  "bad_type", // 6
  "unknown_key", // 7
  "bad_signature", // 8
  "bad_issuer", // 9
  "bad_audience", // 10
  "bad_product", // 11
  "bad_user", // 12
  "invalid_claims", // 13
  "expired", // 14
  "not_yet_valid", // 15
  "lifetime_too_long", // 16
  "keys_unavailable", // 17
];
const CODE_UNKNOWN_KEY = 7;

// Problem titles: the same as verifier/middleware.go codeTitles.
const TITLES = {
  missing: "Admission token required",
  too_large: "Admission token too large",
  malformed: "Malformed admission token",
  duplicate_key: "Admission token has duplicate JSON members",
  unsupported_alg: "Admission token algorithm not accepted",
  forbidden_header: "Admission token has a forbidden header",
  bad_type: "Not an admission token",
  unknown_key: "Admission token signed by an unknown key",
  bad_signature: "Admission token signature invalid",
  bad_issuer: "Admission token from another issuer",
  bad_audience: "Admission token for another audience",
  bad_product: "Admission token for another product",
  bad_user: "Admission token for another user",
  invalid_claims: "Admission token claims invalid",
  expired: "Admission token expired",
  not_yet_valid: "Admission token not yet valid",
  lifetime_too_long: "Admission token lifetime too long",
  keys_unavailable: "Signing keys unavailable",
};

// Glue statuses (≥ 100) of the ABI: never a verdict on a token.
const GLUE_STATUS = { 100: "bad_argument", 101: "bad_keys", 102: "bad_config", 103: "not_ready" };

const COOKIE = "flashgate_admission";
const HEADER_PREFIX = "x-flashgate-";
// At most one unknown-kid JWKS refresh per this many ms per isolate.
const UNKNOWN_KID_REFRESH_MS = 10_000;
// Bound on one JWKS fetch (and on how long a request waits for one).
const JWKS_FETCH_TIMEOUT_MS = 5_000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

// ---------------------------------------------------------------------------
// The wasm instance (one per isolate).

// WasmVerifier wraps one instance of the module. A trap (the module is built
// with -panic=trap) leaves an instance unusable: the caller drops it and the
// next request builds a fresh one from the cached JWKS and configuration.
class WasmVerifier {
  constructor() {
    this.x = new WebAssembly.Instance(wasmModule, {}).exports;
    // A TinyGo reactor: _initialize runs the package initialisers and must be
    // called once before any other export (calling one first traps).
    if (typeof this.x._initialize === "function") this.x._initialize();
    const v = this.x.abi_version();
    if (v !== ABI_VERSION) {
      throw new Error(`flashgate-verifier.wasm speaks ABI ${v}, worker.js speaks ${ABI_VERSION}`);
    }
    this.keysText = null; // JWKS given to set_keys
    this.configText = null; // text given to configure
  }

  // call copies strings into fresh alloc buffers, calls fn with the flat
  // (ptr, len, ptr, len, …) list, and frees the buffers again.
  call(strings, fn) {
    const x = this.x;
    const ptrs = [];
    const args = [];
    for (const s of strings) {
      const b = encoder.encode(s);
      if (b.length === 0) {
        args.push(0, 0);
        continue;
      }
      const p = x.alloc(b.length) >>> 0;
      if (p === 0) {
        args.push(0, b.length); // too large for alloc: the glue answers bad_argument
        continue;
      }
      ptrs.push(p);
      // Take memory.buffer after alloc: a grown memory detaches old views.
      new Uint8Array(x.memory.buffer, p, b.length).set(b);
      args.push(p, b.length);
    }
    const status = fn(args);
    // result_ptr/result_len stay valid until the next set_keys/configure/verify.
    const result = this.result();
    for (const p of ptrs) x.free(p);
    return { status, result };
  }

  result() {
    const n = this.x.result_len() >>> 0;
    if (n === 0) return "";
    const p = this.x.result_ptr() >>> 0;
    return decoder.decode(new Uint8Array(this.x.memory.buffer, p, n));
  }

  configure(text) {
    if (text === this.configText) return;
    const { status, result } = this.call([text], ([p, n]) => this.x.configure(p, n));
    if (status !== 0) throw new ConfigError(`configure: ${glueName(status)}: ${result}`);
    this.configText = text;
  }

  setKeys(text) {
    if (text === this.keysText) return;
    const { status, result } = this.call([text], ([p, n]) => this.x.set_keys(p, n));
    if (status !== 0) throw new Error(`set_keys: ${glueName(status)}: ${result}`);
    this.keysText = text;
  }

  // verify returns {code, result}: code 0 with the claims JSON, a verifier
  // code (1…) or a glue status (≥ 100) with a diagnostic message.
  verify(token, product, nowUnix) {
    const { status, result } = this.call([token, product, ""], ([tp, tn, pp, pn, up, un]) =>
      // now is an i64: a BigInt on the JS side.
      this.x.verify(tp, tn, pp, pn, up, un, BigInt(nowUnix)),
    );
    return { code: status, result };
  }
}

class ConfigError extends Error {}

function glueName(status) {
  return GLUE_STATUS[status] ?? `status ${status}`;
}

// ---------------------------------------------------------------------------
// Isolate state: the instance, the JWKS cache, the refresh bookkeeping.

let instance = null; // WasmVerifier
let jwksText = null; // last JWKS accepted by set_keys
let jwksFetchedAt = 0; // Date.now() of that fetch
let jwksInflight = null; // Promise of the running fetch, shared by every request
let lastUnknownKidRefresh = -Infinity; // Date.now() of the last unknown-kid refresh

// verifierFor returns the isolate's instance with cfg and the cached keys applied.
function verifierFor(cfg) {
  if (instance === null) instance = new WasmVerifier();
  instance.configure(cfg.configText);
  if (jwksText !== null) instance.setKeys(jwksText);
  return instance;
}

// withInstance runs fn(verifier); after a trap it drops the instance and
// retries once on a fresh one.
function withInstance(cfg, fn) {
  for (let attempt = 0; ; attempt++) {
    try {
      return fn(verifierFor(cfg));
    } catch (err) {
      if (!(err instanceof WebAssembly.RuntimeError) || attempt > 0) throw err;
      console.error("flashgate: wasm trap, rebuilding the instance:", err);
      instance = null;
    }
  }
}

async function fetchJWKS(env, cfg) {
  const init = {
    headers: { accept: "application/jwk-set+json, application/json" },
    signal: AbortSignal.timeout(JWKS_FETCH_TIMEOUT_MS),
  };
  const res = env.ISSUER ? await env.ISSUER.fetch(cfg.jwksURL, init) : await fetch(cfg.jwksURL, init);
  if (!res.ok) throw new Error(`GET ${cfg.jwksURL}: HTTP ${res.status}`);
  const text = await res.text();
  // set_keys validates the document; a rejected one leaves the old keys in use.
  withInstance(cfg, (v) => v.setKeys(text));
  jwksText = text;
  jwksFetchedAt = Date.now();
}

// refreshKeys starts a JWKS fetch, or joins the one in flight, and waits for
// it at most JWKS_FETCH_TIMEOUT_MS.
function refreshKeys(env, cfg, ctx) {
  if (jwksInflight === null) {
    const p = fetchJWKS(env, cfg).finally(() => {
      if (jwksInflight === p) jwksInflight = null;
    });
    jwksInflight = p;
    // Keep the fetch alive even if the request that started it ends first:
    // other requests may be waiting for it.
    ctx.waitUntil(p.catch(() => {}));
  }
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error("JWKS fetch timed out")), JWKS_FETCH_TIMEOUT_MS);
  });
  return Promise.race([jwksInflight, timeout]).finally(() => clearTimeout(timer));
}

// ensureKeys loads the JWKS on first use and after FLASHGATE_JWKS_TTL_SECONDS.
// With keys already cached, a failed refresh keeps the old ones (retried
// after UNKNOWN_KID_REFRESH_MS); with none, it throws.
async function ensureKeys(env, cfg, ctx) {
  const now = Date.now();
  if (jwksText !== null && now - jwksFetchedAt < cfg.ttlMs) return;
  try {
    await refreshKeys(env, cfg, ctx);
  } catch (err) {
    if (jwksText === null) throw err;
    console.warn("flashgate: JWKS refresh failed, keeping the cached keys:", String(err));
    jwksFetchedAt = now - cfg.ttlMs + UNKNOWN_KID_REFRESH_MS;
  }
}

// ---------------------------------------------------------------------------
// Configuration from the environment.

function readConfig(env) {
  const str = (name, def) => {
    const v = env[name];
    return v === undefined || v === null || v === "" ? def : String(v);
  };
  const cfg = {
    issuer: str("FLASHGATE_ISSUER", "flashgate"),
    audience: str("FLASHGATE_AUDIENCE", "orders"),
    leeway: str("FLASHGATE_LEEWAY_SECONDS", "0"),
    maxLifetime: str("FLASHGATE_MAX_LIFETIME_SECONDS", ""),
    jwksURL: str("FLASHGATE_JWKS_URL", ""),
    ttlMs: Number(str("FLASHGATE_JWKS_TTL_SECONDS", "300")) * 1000,
    prefix: str("FLASHGATE_PRODUCT_PREFIX", "/products/"),
    originURL: str("FLASHGATE_ORIGIN_URL", ""),
    waitingRoomURL: str("FLASHGATE_WAITING_ROOM_URL", ""),
  };
  if (!cfg.prefix.endsWith("/")) cfg.prefix += "/";
  cfg.prefixLower = cfg.prefix.toLowerCase();
  if (!cfg.jwksURL) throw new ConfigError("FLASHGATE_JWKS_URL is not set");
  if (!Number.isFinite(cfg.ttlMs) || cfg.ttlMs < 0) throw new ConfigError("FLASHGATE_JWKS_TTL_SECONDS must be a number of seconds");
  const lines = [["iss", cfg.issuer], ["aud", cfg.audience], ["leeway", cfg.leeway]];
  if (cfg.maxLifetime) lines.push(["max_lifetime", cfg.maxLifetime]);
  for (const [name, value] of lines) {
    if (/[\r\n]/.test(value)) throw new ConfigError(`the value for ${name} contains a line break`);
  }
  // Validation of the values themselves is the module's (configure).
  cfg.configText = lines.map(([n, v]) => `${n}=${v}\n`).join("");
  return cfg;
}

// ---------------------------------------------------------------------------
// Request plumbing.

// productOf returns the product of a protected path, "" for a protected path
// without one, or null for an unprotected path. Matching is deliberately
// wider than most origins route (repeated slashes collapsed, %2F decoded,
// ASCII case ignored) so that no spelling of a protected path slips through.
function productOf(pathname, cfg) {
  const norm = pathname.replace(/%2f/gi, "/").replace(/\/{2,}/g, "/");
  if (!norm.toLowerCase().startsWith(cfg.prefixLower)) return null;
  const seg = norm.slice(cfg.prefix.length).split("/")[0];
  try {
    return decodeURIComponent(seg);
  } catch {
    return "";
  }
}

function tokenOf(request) {
  const auth = request.headers.get("authorization");
  if (auth && auth.length > 7 && auth.slice(0, 7).toLowerCase() === "bearer ") {
    const t = auth.slice(7).replace(/^ +/, "");
    if (t) return t;
  }
  const cookie = request.headers.get("cookie");
  if (cookie) {
    for (const part of cookie.split(";")) {
      const eq = part.indexOf("=");
      if (eq > 0 && part.slice(0, eq).trim() === COOKIE) {
        const v = part.slice(eq + 1).trim();
        if (v) return v;
      }
    }
  }
  return "";
}

function wantsJSON(request) {
  return /application\/(problem\+)?json/i.test(request.headers.get("accept") ?? "");
}

// forward sends the request to the origin after deleting every X-Flashgate-*
// header the client sent and setting the verified ones (claims may be null).
async function forward(request, env, cfg, url, claims) {
  let target = request.url;
  if (!env.ORIGIN && cfg.originURL) target = cfg.originURL.replace(/\/+$/, "") + url.pathname + url.search;
  const out = new Request(target, request);
  const drop = [];
  for (const name of out.headers.keys()) if (name.toLowerCase().startsWith(HEADER_PREFIX)) drop.push(name);
  for (const name of drop) out.headers.delete(name);
  if (claims) {
    out.headers.set("X-Flashgate-User", claims.sub);
    out.headers.set("X-Flashgate-Product", claims.product);
    out.headers.set("X-Flashgate-Admission", claims.jti);
  }
  // With neither ORIGIN nor FLASHGATE_ORIGIN_URL the request goes on to the
  // zone's origin (the Worker runs on a route in front of it).
  try {
    return await (env.ORIGIN ? env.ORIGIN.fetch(out) : fetch(out));
  } catch (err) {
    console.error("flashgate: origin unreachable:", String(err));
    return problem(502, "origin-unreachable", "Origin unreachable", "origin_unreachable");
  }
}

function problem(status, type, title, reason, detail, extraHeaders) {
  const body = { type: `https://flashgate.dev/problems/${type}`, title, status, reason };
  if (detail) body.detail = detail;
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/problem+json", "cache-control": "no-store", ...extraHeaders },
  });
}

// refuse answers a request whose token was missing or refused.
function refuse(request, cfg, product, reason, detail) {
  if (reason === "keys_unavailable") {
    return problem(503, "token-keys-unavailable", TITLES[reason], reason, detail, { "retry-after": "1" });
  }
  if (!wantsJSON(request) && cfg.waitingRoomURL) {
    const to = new URL(cfg.waitingRoomURL);
    to.searchParams.set("room", product);
    to.searchParams.set("reason", reason);
    // The way back: the waiting page sends the shopper here once admitted
    // (the issuer checks it against FLASHGATE_RETURN_ORIGINS first).
    to.searchParams.set("return", request.url);
    return new Response(null, { status: 302, headers: { location: to.toString(), "cache-control": "no-store" } });
  }
  let status = 401;
  let challenge = 'Bearer error="invalid_token"';
  if (reason === "missing") challenge = "Bearer";
  if (reason === "bad_product" || reason === "bad_user") {
    status = 403;
    challenge = 'Bearer error="insufficient_scope"';
  }
  const title = TITLES[reason] ?? "Admission token refused";
  return problem(status, `token-${reason.replaceAll("_", "-")}`, title, reason, detail, { "www-authenticate": challenge });
}

function internalError(err) {
  console.error("flashgate:", err);
  const misconfigured = err instanceof ConfigError;
  return problem(500, misconfigured ? "worker-misconfigured" : "internal", misconfigured ? "Worker misconfigured" : "Internal error",
    misconfigured ? "misconfigured" : "internal");
}

async function handle(request, env, ctx) {
  const cfg = readConfig(env);
  const url = new URL(request.url);
  const product = productOf(url.pathname, cfg);
  if (product === null) return forward(request, env, cfg, url, null); // unprotected
  if (product === "") {
    return problem(404, "unknown-route", "No product in the path", "unknown_route",
      `protected paths are ${cfg.prefix}<product>/…`);
  }

  const token = tokenOf(request);
  if (!token) {
    return refuse(request, cfg, product, "missing",
      `send the admission token as a Bearer token or in the ${COOKIE} cookie`);
  }

  try {
    await ensureKeys(env, cfg, ctx);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    console.error("flashgate: JWKS unavailable:", String(err));
    return refuse(request, cfg, product, "keys_unavailable", "the issuer's key set could not be fetched");
  }

  const now = Math.floor(Date.now() / 1000);
  let r = withInstance(cfg, (v) => v.verify(token, product, now));
  if (r.code === CODE_UNKNOWN_KEY && (jwksInflight !== null || Date.now() - lastUnknownKidRefresh >= UNKNOWN_KID_REFRESH_MS)) {
    // A kid we do not know: maybe the issuer rotated. Refresh once (or join
    // the refresh in flight) and verify again.
    if (jwksInflight === null) lastUnknownKidRefresh = Date.now();
    try {
      await refreshKeys(env, cfg, ctx);
    } catch (err) {
      console.error("flashgate: JWKS refresh failed:", String(err));
      return refuse(request, cfg, product, "keys_unavailable", "the issuer's key set could not be fetched");
    }
    r = withInstance(cfg, (v) => v.verify(token, product, now));
  }

  if (r.code === 0) return forward(request, env, cfg, url, JSON.parse(r.result));
  if (r.code >= 100) throw new Error(`verify: ${glueName(r.code)}: ${r.result}`);
  return refuse(request, cfg, product, CODE_NAMES[r.code] ?? `code_${r.code}`, r.result);
}

export default {
  async fetch(request, env, ctx) {
    try {
      return await handle(request, env, ctx);
    } catch (err) {
      return internalError(err);
    }
  },
};
