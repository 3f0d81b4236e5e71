// flashgate edge verifier — a Cloudflare Worker (ES module syntax) that guards
// /products/<product>/… with flashgate admission tokens.
//
// Verification is the flashgate-verifier package's (js/flashgate-verifier:
// the TinyGo-built wasm module, ABI version 2, plus its JWK Set cache and,
// where the runtime has it, WebCrypto Ed25519). This file reads the
// configuration, keeps one Verifier per isolate, and writes the HTTP answers.
// See README.md in this folder.

import { Verifier, VerifierError, refusal, verifyRoomBeacon } from "flashgate-verifier";
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
    // The edge directive document (an operator's stop), fetched the same
    // way for its Cache-Control max-age (5 s from `flashgate serve`): a
    // token issued before its room's not_before is refused room_stopped.
    // A failed fetch keeps the last document; none yet refuses
    // (directives_unavailable): never fail open.
    ...(cfg.directivesURL ? { directivesUrl: cfg.directivesURL } : {}),
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
    directivesURL: str("FLASHGATE_DIRECTIVES_URL", ""),
    ttlMs: wholeSeconds("FLASHGATE_JWKS_TTL_SECONDS", "300") * 1000,
    crypto: str("FLASHGATE_CRYPTO", "auto"),
    debug: /^(1|true|yes)$/i.test(str("FLASHGATE_DEBUG", "")),
    prefix: str("FLASHGATE_PRODUCT_PREFIX", "/products/"),
    originURL: str("FLASHGATE_ORIGIN_URL", ""),
    waitingRoomURL: str("FLASHGATE_WAITING_ROOM_URL", ""),
    // "off": the worker forwards beacon requests like any other path.
    beacon: str("FLASHGATE_BEACON", "on") !== "off",
  };
  if (!cfg.prefix.startsWith("/")) cfg.prefix = "/" + cfg.prefix;
  if (!cfg.prefix.endsWith("/")) cfg.prefix += "/";
  // The prefix's segments, lower-cased: "/products/" → ["products"].
  cfg.prefixSegs = cfg.prefix.toLowerCase().split("/").slice(1, -1);
  if (!cfg.jwksURL) throw new ConfigError("FLASHGATE_JWKS_URL is not set");
  // The directives sit next to the JWK Set unless told otherwise; "off"
  // turns the stop check off (an issuer without it).
  if (cfg.directivesURL === "off") cfg.directivesURL = null;
  else if (!cfg.directivesURL) cfg.directivesURL = new URL("/.well-known/flashgate-directives.json", cfg.jwksURL).toString();
  if (!CRYPTO_MODES.includes(cfg.crypto)) {
    throw new ConfigError(`FLASHGATE_CRYPTO must be auto, host or pure, not ${JSON.stringify(cfg.crypto)}`);
  }
  // Everything Verifier.create is given; a change builds a new Verifier.
  // (Validation of the values themselves is the package's and the module's.)
  cfg.key = JSON.stringify([cfg.issuer, cfg.audience, cfg.leeway, cfg.maxLifetime, cfg.jwksURL, cfg.ttlMs,
    cfg.directivesURL, cfg.crypto, Boolean(env.ISSUER)]);
  return cfg;
}

// ---------------------------------------------------------------------------
// Request plumbing.

// Path spellings (README.md#paths).
//
// The worker judges one path and forwards exactly that path: the canonical
// path, never the spelling the client sent. classify reads the request's
// path (as the client spelled it, taken from request.url before URL parsing
// removes anything) in many ways, one per kind of server:
//   - canonical: RFC 3986 §6.2.2 normalisation (percent-encoded unreserved
//     characters decoded, the hex of every other escape upper-cased), with
//     %2F, %5C and "\" read as "/", empty segments ("//") collapsed and dot
//     segments removed (§5.2.4). This is the path that is verified and
//     forwarded, protected or not. It holds no dot segment, no "//", no "\"
//     and no escaped "/", "\" or unreserved character, so every origin reads
//     it the same way.
//   - readings (READINGS): split first and decode each segment (Express,
//     path-to-regexp), decode first and split (Flask/Werkzeug, Django, a Go
//     handler on r.URL.Path), or the laxest (every escape decoded up to three
//     times, IIS's %uXXXX, overlong UTF-8, ";params" cut, NUL cut, NFKC
//     (fullwidth letters), trailing dots and spaces trimmed); each with and
//     without dot-segment removal and with "\" as data or as "/".
// Every reading, of the spelling and of the canonical path, compares the
// prefix ignoring case and gives null (outside the prefix), "" (the bare
// prefix) or the product segment, decoded. The path is protected when any
// reading lies under the prefix; it is then verified only when every such
// reading names the very product of the canonical path and nothing in it is
// ambiguous (an escape of an escaped "/", "\" or ".", an escaped control
// character, invalid or overlong UTF-8, a "%" without two hex digits);
// otherwise it is refused (400 ambiguous_path) before the origin.

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
const HEX2 = /^[0-9A-Fa-f]{2}$/;
// PCHARS is a path that needs no percent-encoding: RFC 3986 pchar, "/",
// "%" and "\" (both read below); any other character is percent-encoded
// (UTF-8).
const PCHARS = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%\\]*$/;
// PLAIN is a path every reading reads alike: no escape, "\" or ";", no
// empty or dot segment, no segment ending in "." (trimmed by Windows
// servers).
const PLAIN = /^(\/[A-Za-z0-9\-_~!$&'()*+,=:@]+(\.+[A-Za-z0-9\-_~!$&'()*+,=:@]+)*)*\/?$/;

// READINGS are the ways servers read a path (see above): mode "split" splits
// on "/" and then decodes each segment once, "decode" decodes once and then
// splits, "loose" is the laxest.
const READINGS = [];
for (const mode of ["split", "decode", "loose"]) {
  for (const dots of [false, true]) {
    for (const backslash of [false, true]) READINGS.push({ mode, dots, backslash });
  }
}

// utf8 decodes bytes; strict returns null for anything not well-formed
// UTF-8 (overlong forms, surrogates, beyond U+10FFFF, truncated), lax
// decodes overlong forms to their code point and anything else to U+FFFD.
function utf8(bytes, strict) {
  let out = "";
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i];
    const n = b < 0x80 ? 0 : b >= 0xc0 && b < 0xe0 ? 1 : b >= 0xe0 && b < 0xf0 ? 2 : b >= 0xf0 && b < 0xf8 ? 3 : -1;
    let cp = n === 0 ? b : n === 1 ? b & 0x1f : n === 2 ? b & 0x0f : b & 0x07;
    let ok = n >= 0 && i + n < bytes.length;
    for (let k = 1; ok && k <= n; k++) {
      const c = bytes[i + k];
      if ((c & 0xc0) !== 0x80) ok = false;
      else cp = (cp << 6) | (c & 0x3f);
    }
    if (ok && (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))) ok = false;
    if (ok && strict && cp < [0, 0x80, 0x800, 0x10000][n]) ok = false; // overlong
    if (!ok) {
      if (strict) return null;
      out += "\ufffd";
      i++;
      continue;
    }
    out += String.fromCodePoint(cp);
    i += n + 1;
  }
  return out;
}

const encoder = new TextEncoder();

// spelled returns the path of the request URL string as the client spelled
// it (before URL parsing removes dot segments or turns "\" into "/"), with
// every character outside PCHAR percent-encoded as UTF-8, or null when it is
// no path (the request target "*", or an authority with no path after it).
// The authority ends where the URL parser ends it: at the first "/", "\",
// "?" or "#".
function spelled(href) {
  const start = href.indexOf("//");
  if (start < 0) return null;
  let i = start + 2;
  while (i < href.length && !"/\\?#".includes(href[i])) i++;
  let j = i;
  while (j < href.length && href[j] !== "?" && href[j] !== "#") j++;
  const raw = href.slice(i, j);
  if (raw === "") return "/";
  if (raw[0] !== "/" && raw[0] !== "\\") return null;
  if (PCHARS.test(raw)) return raw;
  const out = [];
  for (const ch of raw) {
    if (PCHARS.test(ch)) out.push(ch);
    else for (const b of encoder.encode(ch)) out.push("%" + (b < 16 ? "0" : "") + b.toString(16).toUpperCase());
  }
  return out.join("");
}

// removeDots removes dot segments (RFC 3986 §5.2.4) and empty segments from
// an absolute path; a path ending in "/", ".", or ".." keeps its final "/".
function removeDots(path) {
  if (!path.includes("//") && !path.includes("/.")) return path;
  const segs = path.split("/");
  const out = [];
  let trailing = false;
  for (let i = 1; i < segs.length; i++) {
    const s = segs[i];
    if (s === "." || s === ".." || s === "") {
      if (s === "..") out.pop();
      trailing = true;
      continue;
    }
    out.push(s);
    trailing = false;
  }
  return "/" + out.join("/") + (trailing && out.length > 0 ? "/" : "");
}

// canonicalPath returns the canonical reading of path (a spelled path) and
// what is ambiguous in it ("" when nothing).
function canonicalPath(path) {
  let out = "";
  let ambiguous = "";
  let high = []; // a run of escaped bytes >= 0x80, checked as UTF-8
  const endRun = () => {
    if (high.length > 0 && utf8(high, true) === null) ambiguous ||= "invalid or overlong UTF-8";
    high = [];
  };
  for (let i = 0; i < path.length; i++) {
    const ch = path[i];
    if (ch !== "%") {
      endRun();
      out += ch === "\\" ? "/" : ch;
      continue;
    }
    const hex = path.slice(i + 1, i + 3);
    if (!HEX2.test(hex)) {
      endRun();
      ambiguous ||= "a % without two hex digits";
      out += "%25";
      continue;
    }
    i += 2;
    const b = parseInt(hex, 16);
    if (b >= 0x80) {
      high.push(b);
      out += "%" + hex.toUpperCase();
      continue;
    }
    endRun();
    if (b < 0x20 || b === 0x7f) ambiguous ||= "an escaped control character";
    const c = String.fromCharCode(b);
    if (UNRESERVED.test(c)) out += c;
    else if (c === "/" || c === "\\") out += "/";
    else out += "%" + hex.toUpperCase();
  }
  endRun();
  if (/%25(25)*(2F|5C|2E)/i.test(out)) ambiguous ||= "a multiply encoded /, \\ or .";
  return { path: removeDots(out.startsWith("/") ? out : "/" + out), ambiguous };
}

// decodeOnce decodes every escape of s once (lax UTF-8: overlong forms
// decoded, invalid bytes U+FFFD; a "%" without two hex digits kept).
function decodeOnce(s) {
  if (!s.includes("%")) return s;
  return s.replace(/(%[0-9A-Fa-f]{2})+/g, (run) => {
    const bytes = [];
    for (let i = 0; i < run.length; i += 3) bytes.push(parseInt(run.slice(i + 1, i + 3), 16));
    return utf8(bytes, false);
  });
}

// looseDecode is the laxest decoding: up to three rounds of every escape
// (IIS's %uXXXX too), cut at the first NUL, NFKC (fullwidth "／", "ｐ", "．").
function looseDecode(s) {
  for (let n = 0; n < 3 && s.includes("%"); n++) {
    s = decodeOnce(s.replace(/%u([0-9A-Fa-f]{4})/g, (_, h) => String.fromCharCode(parseInt(h, 16))));
  }
  const nul = s.indexOf("\0");
  if (nul >= 0) s = s.slice(0, nul);
  return s.normalize("NFKC");
}

// readProduct reads path (starting with "/") the way r says and returns null
// when it is outside the prefix, "" for the bare prefix, else the product
// segment (decoded).
function readProduct(path, r, cfg) {
  let s = path;
  if (r.mode === "decode") s = decodeOnce(s);
  else if (r.mode === "loose") s = looseDecode(s);
  if (r.backslash) s = s.replaceAll("\\", "/");
  const n = cfg.prefixSegs.length;
  const segs = [];
  let trailing = false;
  let from = s.indexOf("/") + 1;
  if (from === 0) return null;
  for (;;) {
    const to = s.indexOf("/", from);
    let seg = to < 0 ? s.slice(from) : s.slice(from, to);
    if (r.mode === "split") seg = decodeOnce(seg);
    else if (r.mode === "loose") {
      seg = seg.split(";")[0];
      if (seg !== "." && seg !== "..") seg = seg.replace(/[. ]+$/, "");
    }
    if (seg === "" || (r.dots && (seg === "." || seg === ".."))) {
      if (seg === "..") segs.pop();
      trailing = true;
    } else {
      segs.push(seg);
      trailing = false;
      // Past the product with nothing that can pop back: done.
      if (segs.length > n + 1 && !r.dots) break;
    }
    if (to < 0) break;
    from = to + 1;
  }
  for (let i = 0; i < n; i++) {
    if (i >= segs.length || segs[i].toLowerCase() !== cfg.prefixSegs[i]) return null;
  }
  if (segs.length > n) return segs[n];
  return trailing ? "" : null;
}

// classify returns {invalid: why} for a request URL with no usable path,
// {ambiguous: why}, or {product, path}: path is the canonical path (what is
// judged and forwarded), product null for an unprotected path, "" for the
// bare prefix, else the product to verify.
function classify(href, cfg) {
  const spelling = spelled(href);
  if (spelling === null) return { invalid: "the request target is not a path" };
  if (PLAIN.test(spelling)) {
    // Nothing to decode, cut or remove: every reading is this path.
    return { product: readProduct(spelling, READINGS[0], cfg), path: spelling };
  }
  const canon = canonicalPath(spelling);
  const product = readProduct(canon.path, READINGS[0], cfg);
  let names = product !== null;
  for (const path of [spelling, canon.path]) {
    for (const r of READINGS) {
      const p = readProduct(path, r, cfg);
      if (p === null) continue;
      names = true;
      if (p !== product) {
        return { ambiguous: product === null
          ? "a server that does not remove dot segments, or decodes more, reads it under the prefix"
          : "servers that decode, cut ;params or remove dot segments differently read another product" };
      }
    }
  }
  if (names && canon.ambiguous) return { ambiguous: canon.ambiguous };
  return { product, path: canon.path };
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
// path is the canonical path (classify): whatever the client spelled, the
// origin gets the path that was judged, protected or not.
async function forward(request, env, cfg, url, path, claims) {
  // With neither ORIGIN nor FLASHGATE_ORIGIN_URL the request goes on to the
  // zone's origin (the Worker runs on a route in front of it).
  const base = !env.ORIGIN && cfg.originURL ? cfg.originURL.replace(/\/+$/, "") : url.origin;
  const out = new Request(base + path + url.search, request);
  const drop = [];
  for (const name of out.headers.keys()) if (name.toLowerCase().startsWith(HEADER_PREFIX)) drop.push(name);
  for (const name of drop) out.headers.delete(name);
  if (claims) {
    out.headers.set("X-Flashgate-User", claims.sub);
    out.headers.set("X-Flashgate-Product", claims.product);
    out.headers.set("X-Flashgate-Admission", claims.jti);
  }
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
  if (reason !== "keys_unavailable" && reason !== "directives_unavailable" && !wantsJSON(request) && cfg.waitingRoomURL) {
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

// invalidTarget answers a request whose target is no path the worker can
// judge (the "*" of OPTIONS *, a Host the URL parser refuses).
function invalidTarget(why) {
  return problem(400, "invalid-target", "Invalid request target", "invalid_target",
    `${why}; ask for an absolute path`);
}

// ---------------------------------------------------------------------------
// The room beacon (README.md#the-room-beacon): GET /v1/rooms/<room>/beacon is
// one public signed document per room, the same for every buyer. The worker
// answers it from a per-room cache in the isolate, fetching it from the issuer
// (the ISSUER binding, or the JWK Set's origin) at most once per its max-age
// (one fetch at a time per room; a copy up to stale-while-revalidate old is
// answered meanwhile), and only after verifying it (verifyRoomBeacon: the
// admission keys, typ flashgate-beacon+jwt, iss, room, exp). However many
// pages poll, the issuer sees about one beacon request per room per max-age
// per isolate.

const BEACON_PATH = /^\/v1\/rooms\/([^/]+)\/beacon$/;
const MAX_BEACON_ROOMS = 10000;
// beacons: room → {until, staleUntil, refreshing, status, body, contentType, cacheControl}.
const beacons = new Map();

// ageOf reads max-age and stale-while-revalidate (seconds) from Cache-Control.
function ageOf(cc) {
  const n = (name, def) => {
    const m = new RegExp(`(?:^|,)\\s*${name}=(\\d+)`, "i").exec(cc ?? "");
    return m ? Number(m[1]) : def;
  };
  return { maxAge: Math.max(1, n("max-age", 1)), stale: n("stale-while-revalidate", 0) };
}

async function fetchBeacon(env, cfg, room, path) {
  const url = new URL(path, cfg.jwksURL).toString();
  const up = await (env.ISSUER ? env.ISSUER.fetch(url, { headers: { accept: "application/jwt" } }) : fetch(url));
  const body = new TextDecoder().decode(await up.arrayBuffer());
  const now = Date.now();
  if (up.status !== 200) {
    // An unknown room (404) is remembered for a second too, so that a flood of
    // made-up rooms does not reach the issuer; other errors are not kept.
    const keep = up.status === 404 ? 1000 : 0;
    return { until: now + keep, staleUntil: now + keep, status: up.status, body, cacheControl: "no-store",
      contentType: up.headers.get("content-type") ?? "application/problem+json" };
  }
  const verifier = await verifierFor(env, cfg);
  if (!verifier.jwks) await verifier.refreshKeys().catch(() => {});
  const check = () => verifyRoomBeacon(body, { jwks: verifier.jwks ?? { keys: [] }, issuer: cfg.issuer, room, now, leewaySeconds: cfg.leeway });
  let r = await check();
  if (!r.valid && r.reason === "unknown_key") {
    await verifier.refreshKeys().catch(() => {}); // a rotation: the new key
    r = await check();
  }
  if (!r.valid) {
    console.error("flashgate: room beacon refused:", r.reason, r.message);
    return { until: 0, staleUntil: 0, status: 502, contentType: "application/problem+json", cacheControl: "no-store",
      body: JSON.stringify({ type: "https://flashgate.dev/problems/beacon-invalid", title: "Room beacon refused", status: 502,
        reason: "beacon_invalid", detail: `${r.reason}: ${r.message}` }) };
  }
  const cc = up.headers.get("cache-control") ?? "public, max-age=1";
  const { maxAge, stale } = ageOf(cc);
  return { until: now + maxAge * 1000, staleUntil: now + (maxAge + stale) * 1000, status: 200, body, cacheControl: cc,
    contentType: "application/jwt" };
}

// beacon answers a beacon request from the room's cached copy. Requests share
// plain data only (an isolate's requests may not await each other's I/O): the
// one that finds the copy expired fetches it (refreshing marks the fetch); the
// others answer the copy meanwhile while it is within stale-while-revalidate,
// or, without one, wait for it a little (polling the shared entry).
async function beacon(env, cfg, room, path) {
  let e = beacons.get(room);
  if (!e) {
    if (beacons.size >= MAX_BEACON_ROOMS) beacons.clear();
    e = { until: 0, staleUntil: 0, refreshing: 0 };
    beacons.set(room, e);
  }
  let how = "hit";
  const now = Date.now();
  if (now >= e.until) {
    if (e.refreshing && now - e.refreshing < 5000) {
      if (e.body !== undefined && now < e.staleUntil) {
        how = "stale";
      } else {
        how = "wait";
        for (let i = 0; i < 250 && e.refreshing && e.body === undefined; i++) await new Promise((r) => setTimeout(r, 20));
      }
    }
    if (how !== "stale" && Date.now() >= e.until) {
      how = "miss";
      e.refreshing = Date.now();
      try {
        Object.assign(e, await fetchBeacon(env, cfg, room, path));
      } finally {
        e.refreshing = 0;
      }
    }
  }
  const res = new Response(e.body, { status: e.status, headers: { "content-type": e.contentType, "cache-control": e.cacheControl } });
  if (cfg.debug) res.headers.set("x-flashgate-beacon", how);
  return res;
}

async function handle(request, env) {
  const cfg = configFor(env);
  let url;
  try {
    url = new URL(request.url);
  } catch {
    return invalidTarget("the request URL does not parse");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return invalidTarget("not an http(s) URL");
  if (!/^([A-Za-z0-9_-]+\.)*[A-Za-z0-9_-]+\.?$|^\[[0-9A-Fa-f:.]+\]$/.test(url.hostname)) {
    return invalidTarget("the host is not a host name");
  }
  const route = classify(request.url, cfg);
  if (route.invalid) return invalidTarget(route.invalid);
  if (route.ambiguous) {
    return problem(400, "ambiguous-path", "Ambiguous path", "ambiguous_path",
      `the path is read differently by different servers (${route.ambiguous}); ask for ${cfg.prefix}<product>/… plainly`);
  }
  const product = route.product;
  if (product === null && cfg.beacon && request.method === "GET") {
    const m = BEACON_PATH.exec(route.path);
    let room = null;
    try {
      room = m ? decodeURIComponent(m[1]) : null;
    } catch {}
    if (room) return beacon(env, cfg, room, route.path);
  }
  if (product === null) return forward(request, env, cfg, url, route.path, null); // unprotected
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
    res = await forward(request, env, cfg, url, route.path, r.claims);
  } else if (r.reason === "keys_unavailable") {
    console.error("flashgate: JWKS unavailable:", String(verifier.keysError ?? r.message));
    res = refuse(request, cfg, product, r.reason, "the issuer's key set could not be fetched");
  } else if (r.reason === "directives_unavailable") {
    console.error("flashgate: directives unavailable:", String(verifier.directivesError ?? r.message));
    res = refuse(request, cfg, product, r.reason, "the issuer's edge directives could not be fetched");
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
