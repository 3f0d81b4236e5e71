// flashgate edge verifier — a Cloudflare Worker (ES module syntax) that guards
// /products/<product>/… with flashgate admission tokens.
//
// Verification is the flashgate-verifier package's (js/flashgate-verifier:
// the TinyGo-built wasm module, ABI version 2, plus its JWK Set cache and,
// where the runtime has it, WebCrypto Ed25519). This file reads the
// configuration, keeps one Verifier per isolate, and writes the HTTP answers.
// See README.md in this folder.

import { Verifier, VerifierError, refusal } from "flashgate-verifier";
import wasm from "flashgate-verifier/flashgate-verifier.wasm";

const COOKIE = "flashgate_admission";
const HEADER_PREFIX = "x-flashgate-";
const CRYPTO_MODES = ["auto", "host", "pure"];

class ConfigError extends Error {}

// ---------------------------------------------------------------------------
// The Verifier (one per isolate).

// current is the isolate's Verifier: {key, promise}. It is built on the first
// protected request and built again when the configuration (key) changes; a
// rejected build is forgotten, so the next request tries again.
let current = null;

function verifierFor(env, cfg) {
  if (current !== null && current.key === cfg.key) return current.promise;
  const entry = { key: cfg.key, promise: null };
  entry.promise = Verifier.create({
    wasm,
    issuer: cfg.issuer,
    audience: cfg.audience,
    leewaySeconds: cfg.leeway,
    maxLifetimeSeconds: cfg.maxLifetime,
    jwksUrl: cfg.jwksURL,
    // With an ISSUER service binding the JWK Set is fetched through it (the
    // URL's host is then ignored).
    fetch: env.ISSUER ? (u, init) => env.ISSUER.fetch(u, init) : undefined,
    // FLASHGATE_JWKS_TTL_SECONDS caps how long a fetched set is used before
    // the next fetch. The issuer's Cache-Control max-age (60 s from
    // `flashgate serve`) makes it shorter, but not below the package's
    // minRefreshIntervalMs (10 s) unless the TTL itself is shorter.
    maxKeysAgeMs: cfg.ttlMs,
    crypto: cfg.crypto,
  }).then(
    (v) => {
      console.log(`flashgate: verifier ready: crypto ${v.crypto} (FLASHGATE_CRYPTO=${cfg.crypto})`);
      return v;
    },
    (err) => {
      if (current === entry) current = null;
      // Bad options, a configuration or module the package rejects: the
      // Worker is misconfigured (500 misconfigured), not the token refused.
      throw err instanceof VerifierError ? new ConfigError(err.message, { cause: err }) : err;
    },
  );
  current = entry;
  return entry.promise;
}

// ---------------------------------------------------------------------------
// Configuration from the environment.

// configs caches readConfig per env object: the bindings are fixed for an
// isolate, so each request need not parse them again (a new env object, as
// after a deploy, is read afresh; a bad configuration throws every time).
const configs = new WeakMap();

function configFor(env) {
  let cfg = configs.get(env);
  if (cfg === undefined) {
    cfg = readConfig(env);
    configs.set(env, cfg);
  }
  return cfg;
}

function readConfig(env) {
  const str = (name, def) => {
    const v = env[name];
    return v === undefined || v === null || v === "" ? def : String(v);
  };
  // wholeSeconds parses a variable holding whole seconds (undefined when unset).
  const wholeSeconds = (name, def) => {
    const s = str(name, def);
    if (s === undefined) return undefined;
    if (!/^[0-9]+$/.test(s)) throw new ConfigError(`${name} must be a whole number of seconds, not ${JSON.stringify(s)}`);
    return Number(s);
  };
  const cfg = {
    issuer: str("FLASHGATE_ISSUER", "flashgate"),
    audience: str("FLASHGATE_AUDIENCE", "orders"),
    leeway: wholeSeconds("FLASHGATE_LEEWAY_SECONDS", "0"),
    maxLifetime: wholeSeconds("FLASHGATE_MAX_LIFETIME_SECONDS", undefined),
    jwksURL: str("FLASHGATE_JWKS_URL", ""),
    ttlMs: wholeSeconds("FLASHGATE_JWKS_TTL_SECONDS", "300") * 1000,
    crypto: str("FLASHGATE_CRYPTO", "auto"),
    debug: /^(1|true|yes)$/i.test(str("FLASHGATE_DEBUG", "")),
    prefix: str("FLASHGATE_PRODUCT_PREFIX", "/products/"),
    originURL: str("FLASHGATE_ORIGIN_URL", ""),
    waitingRoomURL: str("FLASHGATE_WAITING_ROOM_URL", ""),
  };
  if (!cfg.prefix.endsWith("/")) cfg.prefix += "/";
  cfg.prefixLower = cfg.prefix.toLowerCase();
  if (!cfg.jwksURL) throw new ConfigError("FLASHGATE_JWKS_URL is not set");
  if (!CRYPTO_MODES.includes(cfg.crypto)) {
    throw new ConfigError(`FLASHGATE_CRYPTO must be auto, host or pure, not ${JSON.stringify(cfg.crypto)}`);
  }
  // Everything Verifier.create is given; a change builds a new Verifier.
  // (Validation of the values themselves is the package's and the module's.)
  cfg.key = JSON.stringify([cfg.issuer, cfg.audience, cfg.leeway, cfg.maxLifetime, cfg.jwksURL, cfg.ttlMs,
    cfg.crypto, Boolean(env.ISSUER)]);
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

// refuse answers a request whose token was missing or refused: browsers
// (with a waiting room configured) are sent there, every other client gets
// the package's problem document (refusal: problem.Token's status, title,
// challenge and Retry-After).
function refuse(request, cfg, product, reason, detail) {
  if (reason !== "keys_unavailable" && !wantsJSON(request) && cfg.waitingRoomURL) {
    const to = new URL(cfg.waitingRoomURL);
    to.searchParams.set("room", product);
    to.searchParams.set("reason", reason);
    // The way back: the waiting page sends the shopper here once admitted
    // (the issuer checks it against FLASHGATE_RETURN_ORIGINS first).
    to.searchParams.set("return", request.url);
    return new Response(null, { status: 302, headers: { location: to.toString(), "cache-control": "no-store" } });
  }
  return refusal(reason, detail);
}

function internalError(err) {
  console.error("flashgate:", err);
  const misconfigured = err instanceof ConfigError;
  return problem(500, misconfigured ? "worker-misconfigured" : "internal", misconfigured ? "Worker misconfigured" : "Internal error",
    misconfigured ? "misconfigured" : "internal");
}

// tagged returns res with X-Flashgate-Crypto: host|pure, the path the
// Verifier checked signatures with (FLASHGATE_DEBUG only: tests and benches).
function tagged(res, crypto) {
  const out = new Response(res.body, res);
  out.headers.set("x-flashgate-crypto", crypto);
  return out;
}

async function handle(request, env) {
  const cfg = configFor(env);
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

  const verifier = await verifierFor(env, cfg);
  // The user is not checked at the edge (README.md); the clock is the
  // isolate's, in milliseconds.
  const r = await verifier.verify(token, { product, now: Date.now() });
  let res;
  if (r.valid) {
    res = await forward(request, env, cfg, url, r.claims);
  } else if (r.reason === "keys_unavailable") {
    console.error("flashgate: JWKS unavailable:", String(verifier.keysError ?? r.message));
    res = refuse(request, cfg, product, r.reason, "the issuer's key set could not be fetched");
  } else {
    res = refuse(request, cfg, product, r.reason, r.message);
  }
  return cfg.debug ? tagged(res, verifier.crypto) : res;
}

export default {
  async fetch(request, env) {
    try {
      return await handle(request, env);
    } catch (err) {
      return internalError(err);
    }
  },
};
