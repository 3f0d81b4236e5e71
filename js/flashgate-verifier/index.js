// flashgate-verifier — verify flashgate admission tokens in any JavaScript
// edge runtime (Cloudflare Workers/workerd, Deno, Node ≥ 20, Vercel and
// Netlify edge functions).
//
// Every verification rule lives in the TinyGo-built wasm module (package
// verifier of the flashgate Go module, ABI version 2: wasm/README.md). This
// file moves bytes in and out of linear memory, caches the JWK Set, and — when
// the host has Ed25519 in WebCrypto — performs the one signature check the
// module hands it (verify_begin/verify_finish). It decides nothing about a
// token: the answer, precedence included, is the module's.
//
// No runtime dependencies. See README.md and index.d.ts.

/** The wasm ABI version this file speaks (wasm/main_tinygo.go abiVersion). */
export const ABI_VERSION = 2;

/**
 * Refusal reasons by module code (verifier/errors.go codeNames; codes are
 * stable and only ever appended). Index 0 is "ok".
 */
export const REASONS = Object.freeze([
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
  "room_stopped", // 18 (host-side: directivesUrl)
  "directives_unavailable", // 19 (host-side: directivesUrl)
]);

// How flashgate answers a refused token over HTTP: problem.Token in the Go
// module (RFC 9457 problem details, RFC 6750 §3 challenges). "missing" is no
// token at all. package_test.go checks this table against problem.Token.
const INVALID = 'Bearer error="invalid_token"';
const SCOPE = 'Bearer error="insufficient_scope"';
const row = (status, title, challenge, retryAfter = 0) => Object.freeze({ status, title, challenge, retryAfter });

/**
 * The HTTP answer for each refusal reason (and "missing"): {status, title,
 * challenge (WWW-Authenticate, "" for none), retryAfter (seconds, 0 for
 * none)} — the issuer's and verifier.Middleware's answers (problem.Token).
 */
export const PROBLEMS = Object.freeze({
  missing: row(401, "Admission token required", "Bearer"),
  too_large: row(401, "Admission token too large", INVALID),
  malformed: row(401, "Malformed admission token", INVALID),
  duplicate_key: row(401, "Admission token has duplicate JSON members", INVALID),
  unsupported_alg: row(401, "Admission token algorithm not accepted", INVALID),
  forbidden_header: row(401, "Admission token has a forbidden header", INVALID),
  bad_type: row(401, "Not an admission token", INVALID),
  unknown_key: row(401, "Admission token signed by an unknown key", INVALID),
  bad_signature: row(401, "Admission token signature invalid", INVALID),
  bad_issuer: row(401, "Admission token from another issuer", INVALID),
  bad_audience: row(401, "Admission token for another audience", INVALID),
  bad_product: row(403, "Admission token for another product", SCOPE),
  bad_user: row(403, "Admission token for another user", SCOPE),
  invalid_claims: row(401, "Admission token claims invalid", INVALID),
  expired: row(401, "Admission token expired", INVALID),
  not_yet_valid: row(401, "Admission token not yet valid", INVALID),
  lifetime_too_long: row(401, "Admission token lifetime too long", INVALID),
  keys_unavailable: row(503, "Signing keys unavailable", "", 1),
  room_stopped: row(503, "Waiting room stopped", "", 5),
  directives_unavailable: row(503, "Edge directives unavailable", "", 1),
});

/**
 * refusal returns the RFC 9457 problem response flashgate gives for a
 * refused token: status and title from PROBLEMS, type
 * https://flashgate.dev/problems/token-<reason>, a `reason` member,
 * WWW-Authenticate and Retry-After as PROBLEMS says, Cache-Control: no-store.
 * detail (optional) is echoed: do not pass text you would not show the
 * client (VerifyResult.message may echo the token).
 * @param {string} reason  a REASONS name (not "ok") or "missing"
 * @param {string} [detail]
 * @returns {Response}
 */
export function refusal(reason, detail) {
  const p = PROBLEMS[reason] ?? PROBLEMS.malformed;
  const body = { type: `https://flashgate.dev/problems/token-${reason.replaceAll("_", "-")}`, title: p.title, status: p.status, reason };
  if (detail) body.detail = detail;
  const headers = { "content-type": "application/problem+json", "cache-control": "no-store" };
  if (p.challenge) headers["www-authenticate"] = p.challenge;
  if (p.retryAfter) headers["retry-after"] = String(p.retryAfter);
  return new Response(JSON.stringify(body), { status: p.status, headers });
}

const CODE_UNKNOWN_KEY = 7;
const CODE_KEYS_UNAVAILABLE = 17;

// Glue statuses of the ABI (wasm/README.md): never a verdict on a token.
const GLUE = Object.freeze({
  100: "bad_argument",
  101: "bad_keys",
  102: "bad_config",
  103: "not_ready",
  104: "stale_handle",
});
const STATUS_NOT_READY = 103;
const STATUS_STALE_HANDLE = 104;
const STATUS_CHECK_SIGNATURE = 200;

// The module refuses any input above 16 MiB (alloc returns 0).
const MAX_ALLOC = 16 << 20;
// A token is copied into linear memory at most this long. The module's first
// rule refuses every token over 4,096 bytes on its length alone, so a longer
// prefix gets the same answer as the whole; this only bounds the copy.
const MAX_TOKEN_COPY = 64 << 10;
// One scratch buffer per instance takes the usual inputs without an alloc.
const SCRATCH = 16 << 10;

/** Defaults of VerifierOptions (milliseconds). */
export const DEFAULTS = Object.freeze({
  minRefreshIntervalMs: 10_000,
  maxKeysAgeMs: 300_000,
  fetchTimeoutMs: 5_000,
  directivesMaxAgeMs: 5_000,
  directivesRetryMs: 1_000,
});

// RFC 8032 §7.1, TEST 1: the host-crypto probe.
const PROBE_KEY = hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
const PROBE_SIG = hex(
  "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
);
const ED25519 = { name: "Ed25519" };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Thrown for misuse and misconfiguration (bad options, a rejected JWK Set or
 * configuration, a module of another ABI) — never for a refused token, which
 * is a {valid: false} result.
 */
export class VerifierError extends Error {
  /**
   * @param {string} message
   * @param {string} code  "bad_options", "bad_module", or the ABI glue name (bad_keys, bad_config, …)
   */
  constructor(message, code, options) {
    super(message, options);
    this.name = "VerifierError";
    this.code = code;
  }
}

function hex(s) {
  const b = new Uint8Array(s.length / 2);
  for (let i = 0; i < b.length; i++) b[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return b;
}

function bad(message) {
  return new VerifierError(`flashgate-verifier: ${message}`, "bad_options");
}

// ---------------------------------------------------------------------------
// Loading the module.

async function compile(src) {
  src = await src;
  if (src === undefined || src === null) src = new URL("./flashgate-verifier.wasm", import.meta.url);
  if (src instanceof WebAssembly.Module) return src;
  if (src instanceof ArrayBuffer || ArrayBuffer.isView(src)) return WebAssembly.compile(src);
  if (typeof Response !== "undefined" && src instanceof Response) {
    if (!src.ok) throw new VerifierError(`flashgate-verifier: wasm response HTTP ${src.status}`, "bad_module");
    return WebAssembly.compile(await src.arrayBuffer());
  }
  if (typeof src === "string" || src instanceof URL) {
    const url = new URL(src, import.meta.url);
    if (url.protocol === "file:" && globalThis.process?.versions?.node && !globalThis.Deno) {
      // Node's fetch has no file: URLs.
      const { readFile } = await import("node:fs/promises");
      return WebAssembly.compile(await readFile(url));
    }
    const res = await fetch(url);
    if (!res.ok) throw new VerifierError(`flashgate-verifier: GET ${url}: HTTP ${res.status}`, "bad_module");
    return WebAssembly.compile(await res.arrayBuffer());
  }
  throw bad("wasm must be a WebAssembly.Module, bytes, a Response, a URL or a string");
}

// ---------------------------------------------------------------------------
// Host crypto.

let probed = null; // Promise<SubtleCrypto | null>, once per realm

// probe resolves to subtle when it verifies RFC 8032's TEST 1 and refuses the
// same signature with one bit flipped, else null.
async function probe(subtle) {
  if (!subtle || typeof subtle.importKey !== "function") return null;
  try {
    const key = await subtle.importKey("raw", PROBE_KEY, ED25519, false, ["verify"]);
    const flipped = PROBE_SIG.slice();
    flipped[0] ^= 1;
    const ok = await subtle.verify(ED25519, key, PROBE_SIG, new Uint8Array(0));
    const forged = await subtle.verify(ED25519, key, flipped, new Uint8Array(0));
    return ok === true && forged === false ? subtle : null;
  } catch {
    return null;
  }
}

// nodeCrypto returns a SubtleCrypto-shaped adapter over Node's synchronous
// node:crypto Ed25519 (the same OpenSSL as Node's WebCrypto, without the
// thread-pool round trip that costs WebCrypto ~70 µs a call: docs/performance.md
// "Measurements"), or null outside Node. process.getBuiltinModule (Node ≥
// 20.16) keeps "node:crypto" out of sight of edge bundlers.
function nodeCrypto() {
  const proc = globalThis.process;
  if (globalThis.Deno !== undefined || globalThis.Bun !== undefined || typeof proc?.getBuiltinModule !== "function") return null;
  if (proc.release?.name !== "node") return null;
  let nc;
  try {
    nc = proc.getBuiltinModule("node:crypto");
  } catch {
    return null;
  }
  if (typeof nc?.verify !== "function" || typeof nc?.createPublicKey !== "function") return null;
  return {
    provider: "node:crypto",
    importKey: async (format, raw) =>
      nc.createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: globalThis.Buffer.from(raw).toString("base64url") }, format: "jwk" }),
    verify: (alg, key, sig, data) => nc.verify(null, data, key, sig),
  };
}

// webCrypto resolves to globalThis.crypto.subtle when it passes the probe,
// else null; probed once per realm.
function webCrypto() {
  probed ??= probe(globalThis.crypto?.subtle);
  return probed;
}

// hostSubtle picks who checks signatures on the host path: options.subtle
// when given, else node:crypto in Node, else WebCrypto — each only if it
// passes the probe; null when none does (the pure path).
async function hostSubtle(options) {
  if (options.subtle !== undefined) return probe(options.subtle);
  return (await probe(nodeCrypto())) ?? (await webCrypto());
}

/**
 * Reports whether this runtime's WebCrypto verifies Ed25519 (the host-crypto
 * path of Verifier). Probed once with RFC 8032 §7.1 TEST 1.
 * @returns {Promise<boolean>}
 */
export async function hostCryptoAvailable() {
  return (await webCrypto()) !== null;
}

// ---------------------------------------------------------------------------
// One module instance.

class Instance {
  constructor(module) {
    this.x = new WebAssembly.Instance(module, {}).exports;
    // A TinyGo reactor: _initialize runs the package initialisers and must be
    // called once before any other export.
    if (typeof this.x._initialize === "function") this.x._initialize();
    const v = this.x.abi_version?.();
    if (!(v >= ABI_VERSION)) {
      throw new VerifierError(`flashgate-verifier: the wasm module speaks ABI ${v}; this package needs ${ABI_VERSION} or later`, "bad_module");
    }
    this.scratch = this.x.alloc(SCRATCH) >>> 0;
  }

  // put writes bytes at ptr (memory.buffer is taken after any alloc: growth
  // detaches earlier views).
  put(ptr, bytes) {
    new Uint8Array(this.x.memory.buffer, ptr, bytes.length).set(bytes);
  }

  result() {
    const n = this.x.result_len() >>> 0;
    if (n === 0) return new Uint8Array(0);
    const p = this.x.result_ptr() >>> 0;
    return new Uint8Array(this.x.memory.buffer, p, n).slice();
  }

  // input calls fn(ptr, len) with bytes in module memory.
  input(bytes, fn) {
    if (bytes.length === 0) return fn(0, 0);
    if (bytes.length <= SCRATCH) {
      this.put(this.scratch, bytes);
      return fn(this.scratch, bytes.length);
    }
    const p = this.x.alloc(bytes.length) >>> 0;
    if (p === 0) return fn(0, bytes.length); // the glue answers bad_argument
    try {
      this.put(p, bytes);
      return fn(p, bytes.length);
    } finally {
      this.x.free(p);
    }
  }

  setKeys(bytes) {
    return this.input(bytes, (p, n) => this.x.set_keys(p, n));
  }

  configure(text) {
    return this.input(encoder.encode(text), (p, n) => this.x.configure(p, n));
  }

  // call runs verify or verify_begin (fn) on token, product and user, all
  // strings, at now (Unix seconds, a BigInt).
  call(fn, token, product, user, now) {
    const x = this.x;
    // The common case: everything fits the scratch buffer (UTF-8 is at most
    // 3 bytes per UTF-16 unit).
    if (3 * (token.length + product.length + user.length) <= SCRATCH) {
      const mem = new Uint8Array(x.memory.buffer, this.scratch, SCRATCH);
      const t = encoder.encodeInto(token, mem).written;
      const p = encoder.encodeInto(product, mem.subarray(t)).written;
      const u = encoder.encodeInto(user, mem.subarray(t + p)).written;
      const s = this.scratch;
      return fn(t ? s : 0, t, p ? s + t : 0, p, u ? s + t + p : 0, u, now);
    }
    let tb = encoder.encode(token);
    if (tb.length > MAX_TOKEN_COPY) tb = tb.subarray(0, MAX_TOKEN_COPY);
    const parts = [tb, encoder.encode(product), encoder.encode(user)];
    const ptrs = [];
    try {
      const args = [];
      for (const b of parts) {
        if (b.length === 0) {
          args.push(0, 0);
          continue;
        }
        const p = b.length > MAX_ALLOC ? 0 : x.alloc(b.length) >>> 0;
        if (p !== 0) {
          ptrs.push(p);
          this.put(p, b);
        }
        args.push(p, b.length);
      }
      return fn(...args, now);
    } finally {
      for (const p of ptrs) x.free(p);
    }
  }
}

// ---------------------------------------------------------------------------
// Verifier.

function seconds(now) {
  if (now === undefined) return BigInt(Math.floor(Date.now() / 1000));
  const ms = now instanceof Date ? now.getTime() : now;
  if (typeof ms !== "number" || !Number.isFinite(ms)) throw bad("now must be a Date or milliseconds since the epoch");
  if (Math.abs(ms) < 1e11) {
    throw bad(`now is milliseconds since the epoch (Date.now()), not seconds: got ${ms}`);
  }
  return BigInt(Math.floor(ms / 1000));
}

function configText(o) {
  const req = (name) => {
    if (typeof o[name] !== "string" || o[name] === "") throw bad(`${name} is required (a non-empty string)`);
    return o[name];
  };
  const lines = [["iss", req("issuer")], ["aud", req("audience")]];
  if (o.product !== undefined) lines.push(["product", String(o.product)]);
  for (const [opt, name] of [["leewaySeconds", "leeway"], ["maxLifetimeSeconds", "max_lifetime"]]) {
    if (o[opt] === undefined) continue;
    if (!Number.isInteger(o[opt]) || o[opt] < 0) throw bad(`${opt} must be a whole number of seconds ≥ 0`);
    lines.push([name, String(o[opt])]);
  }
  for (const [name, value] of lines) {
    if (/[\r\n]/.test(value)) throw bad(`the value for ${name} contains a line break`);
  }
  return lines.map(([n, v]) => `${n}=${v}\n`).join("");
}

function jwksBytes(jwks) {
  if (typeof jwks === "string") return encoder.encode(jwks);
  if (jwks instanceof Uint8Array) return jwks;
  if (jwks instanceof ArrayBuffer) return new Uint8Array(jwks);
  if (jwks && typeof jwks === "object") return encoder.encode(JSON.stringify(jwks));
  throw bad("jwks must be a JWK Set: a string, bytes or an object");
}

// maxAgeMs returns Cache-Control max-age in ms, or null (RFC 9111 §5.2.2.1).
function maxAgeMs(res) {
  const cc = res.headers?.get?.("cache-control");
  if (!cc) return null;
  if (/(^|,)\s*(no-store|no-cache)\s*(,|$)/i.test(cc)) return 0;
  const m = /(^|,)\s*max-age\s*=\s*"?(\d+)"?\s*(,|$)/i.exec(cc);
  return m ? Number(m[2]) * 1000 : null;
}

/**
 * Verifies flashgate admission tokens. Create one per isolate/process with
 * Verifier.create and share it; it is not tied to a request.
 */
export class Verifier {
  #module;
  #inst = null;
  #config;
  #keys = null; // Uint8Array of the JWK Set in use
  #subtle = null; // SubtleCrypto for the host-crypto path, or null (pure)
  #cryptoKeys = []; // {raw: Uint8Array(32), key: CryptoKey | Promise<CryptoKey>}
  // Remote JWK Set state.
  #jwksUrl = null;
  #fetch;
  #clock;
  #minRefresh;
  #maxKeysAge;
  #fetchTimeout;
  #fetchedAt = -Infinity; // clock() of the last fetch attempt's end
  #dueAt = -Infinity; // clock() when the set should be refreshed
  #forcedAt = -Infinity; // clock() when the last forced refresh started
  #inflight = null;
  #lastError = null;
  #fetches = 0;
  // Edge directive state (directivesUrl): a Map room → not_before (Unix s).
  #dirUrl = null;
  #dir = null;
  #dirDue = -Infinity; // clock() when the document reaches its max-age
  #dirFailedAt = null; // clock() of the last failed fetch; null after a good one
  #dirInflight = null;
  #dirError = null;
  #dirFetches = 0;
  #dirMaxAge;
  #dirRetry;

  /** Use Verifier.create. */
  constructor(token, module, options, config) {
    if (token !== CREATE) throw new TypeError("use Verifier.create");
    this.#module = module;
    this.#config = config;
    this.#fetch = options.fetch ?? ((url, init) => globalThis.fetch(url, init));
    this.#clock = options.clock ?? (() => Date.now());
    this.#minRefresh = options.minRefreshIntervalMs ?? DEFAULTS.minRefreshIntervalMs;
    this.#maxKeysAge = options.maxKeysAgeMs ?? DEFAULTS.maxKeysAgeMs;
    this.#fetchTimeout = options.fetchTimeoutMs ?? DEFAULTS.fetchTimeoutMs;
    this.#dirMaxAge = options.directivesMaxAgeMs ?? DEFAULTS.directivesMaxAgeMs;
    this.#dirRetry = options.directivesRetryMs ?? DEFAULTS.directivesRetryMs;
    if (options.directivesUrl !== undefined) this.#dirUrl = String(options.directivesUrl);
    for (const [name, v] of [["minRefreshIntervalMs", this.#minRefresh], ["maxKeysAgeMs", this.#maxKeysAge], ["fetchTimeoutMs", this.#fetchTimeout],
      ["directivesMaxAgeMs", this.#dirMaxAge], ["directivesRetryMs", this.#dirRetry]]) {
      if (typeof v !== "number" || !(v >= 0)) throw bad(`${name} must be a number of milliseconds ≥ 0`);
    }
  }

  /**
   * Builds a Verifier: compiles or takes the module, checks its ABI, applies
   * the configuration and the keys (jwks, or the first fetch of jwksUrl),
   * and picks the crypto path. Rejects with VerifierError on bad options, a
   * rejected configuration or JWK Set, or a module of another ABI; a failed
   * first fetch of jwksUrl does not reject (verify answers keys_unavailable
   * and retries, at most once per minRefreshIntervalMs).
   * @param {import("./index.d.ts").VerifierOptions} options
   * @returns {Promise<Verifier>}
   */
  static async create(options) {
    if (!options || typeof options !== "object") throw bad("options are required");
    const config = configText(options);
    if ((options.jwks === undefined) === (options.jwksUrl === undefined)) throw bad("exactly one of jwks and jwksUrl is required");
    const mode = options.crypto ?? "auto";
    if (!["auto", "host", "pure"].includes(mode)) throw bad(`crypto must be "auto", "host" or "pure", not ${JSON.stringify(mode)}`);

    const module = await compile(options.wasm);
    const v = new Verifier(CREATE, module, options, config);
    v.#instance(); // checks the ABI and the configuration now

    if (mode !== "pure") {
      v.#subtle = await hostSubtle(options);
      if (mode === "host" && v.#subtle === null) {
        throw bad('crypto: "host" but this runtime\'s WebCrypto has no Ed25519');
      }
    }
    if (options.jwks !== undefined) {
      v.setKeys(options.jwks);
    } else {
      v.#jwksUrl = String(options.jwksUrl);
      await v.#refresh(false).catch(() => {});
    }
    if (v.#dirUrl !== null) await v.#refreshDirectives().catch(() => {});
    return v;
  }

  /** "host" when signatures are checked with the runtime's Ed25519, "pure" when inside the module. */
  get crypto() {
    return this.#subtle ? "host" : "pure";
  }

  /**
   * Who checks signatures: "webcrypto" (crypto.subtle), "node:crypto" (Node's
   * synchronous Ed25519, preferred in Node), "subtle" (options.subtle) or
   * "wasm" (the module, the pure path).
   */
  get provider() {
    if (!this.#subtle) return "wasm";
    return this.#subtle.provider ?? (this.#subtle === globalThis.crypto?.subtle ? "webcrypto" : "subtle");
  }

  /**
   * The last JWK Set fetch error, or null after a successful fetch (jwksUrl only).
   * @returns {Error | null}
   */
  get keysError() {
    return this.#lastError;
  }

  /**
   * The JWK Set in use ({keys: […]}, parsed), or null before the first one:
   * what verifyRoomBeacon checks a room beacon against.
   * @returns {{keys: object[]} | null}
   */
  get jwks() {
    return this.#keys === null ? null : jsonOf(this.#keys);
  }

  /** How many JWK Set fetches were started (jwksUrl only): for tests and metrics. */
  get keysFetches() {
    return this.#fetches;
  }

  /** The last directive fetch error, or null after a successful fetch (directivesUrl only). */
  get directivesError() {
    return this.#dirError;
  }

  /** How many directive fetches were started (directivesUrl only). */
  get directivesFetches() {
    return this.#dirFetches;
  }

  /**
   * Replaces the key set with a JWK Set ({"keys": […]}, Ed25519 OKP keys).
   * Throws VerifierError (code "bad_keys") when the module rejects it; the
   * previous keys stay in use.
   * @param {string | Uint8Array | ArrayBuffer | object} jwks
   */
  setKeys(jwks) {
    const bytes = jwksBytes(jwks);
    const st = this.#call((i) => i.setKeys(bytes));
    if (st !== 0) {
      throw new VerifierError(`flashgate-verifier: JWK Set rejected: ${this.#text()}`, GLUE[st] ?? `status_${st}`);
    }
    this.#keys = bytes;
    this.#cryptoKeys = [];
  }

  /**
   * Fetches jwksUrl now (or joins the fetch in flight) and applies it. Rejects
   * when the fetch fails or the set is rejected; the previous keys stay.
   * @returns {Promise<void>}
   */
  refreshKeys() {
    if (this.#jwksUrl === null) return Promise.reject(bad("refreshKeys needs jwksUrl"));
    return this.#refresh(false);
  }

  /**
   * Verifies a compact admission token. Resolves to {valid: true, reason:
   * "ok", claims} or {valid: false, reason, message}; reason is one of
   * REASONS. message is a diagnostic for logs (not stable, may echo the
   * token). Rejects only on misuse (bad arguments) or a module fault.
   * @param {string} token
   * @param {import("./index.d.ts").VerifyOptions} [options]
   * @returns {Promise<import("./index.d.ts").VerifyResult>}
   */
  async verify(token, options = {}) {
    if (typeof token !== "string") throw bad("token must be a string");
    const product = options.product ?? "";
    const user = options.user ?? "";
    if (typeof product !== "string" || typeof user !== "string") throw bad("product and user must be strings");
    const now = seconds(options.now);

    if (this.#jwksUrl !== null) {
      if (this.#keys === null || this.#clock() >= this.#dueAt) {
        await this.#refresh(this.#keys === null).catch(() => {});
      }
      if (this.#keys === null) return this.#unavailable();
    }
    let r = await this.#verifyOnce(token, product, user, now);
    if (r.code === CODE_UNKNOWN_KEY && this.#jwksUrl !== null && (this.#inflight || this.#clock() - this.#forcedAt >= this.#minRefresh)) {
      // A kid we do not know: maybe the issuer rotated. Refresh once (or join
      // the refresh in flight) and verify again.
      try {
        await this.#refresh(true);
        r = await this.#verifyOnce(token, product, user, now);
      } catch {
        // The set could not be fetched: the unknown_key answer stands.
      }
    }
    if (r.result.valid && this.#dirUrl !== null) return this.#directive(r.result);
    return r.result;
  }

  // #directive applies the room's edge directive to an accepted result: the
  // verifier's step 14 (verifier/directive.go CheckNotBefore): iat before
  // the room's not_before is room_stopped; no document yet is
  // directives_unavailable (never fail open).
  async #directive(result) {
    const now = this.#clock();
    if (this.#dir === null || now >= this.#dirDue) {
      let p = this.#dirInflight;
      if (!p && (this.#dirFailedAt === null || now - this.#dirFailedAt >= this.#dirRetry)) p = this.#refreshDirectives();
      // After a failure, answer from the last document at once rather than
      // make every request wait for an issuer that is down.
      if (p && (this.#dir === null || this.#dirFailedAt === null)) await p.catch(() => {});
    }
    if (this.#dir === null) {
      const why = this.#dirError ? String(this.#dirError.message ?? this.#dirError) : "no document yet";
      return { valid: false, reason: "directives_unavailable", message: `flashgate-verifier: edge directives unavailable: ${why}` };
    }
    const nb = this.#dir.get(result.claims.product) ?? 0;
    if (result.claims.iat < nb) {
      return { valid: false, reason: "room_stopped", message: `flashgate-verifier: room stopped: iat ${result.claims.iat} < not_before ${nb}` };
    }
    return result;
  }

  /**
   * Fetches directivesUrl now (or joins the fetch in flight). Rejects when
   * the fetch fails or the document is malformed; the last document stays.
   * @returns {Promise<void>}
   */
  refreshDirectives() {
    if (this.#dirUrl === null) return Promise.reject(bad("refreshDirectives needs directivesUrl"));
    return this.#refreshDirectives();
  }

  // ---- internals ----

  #unavailable() {
    const why = this.#lastError ? String(this.#lastError.message ?? this.#lastError) : "no key set yet";
    return { valid: false, reason: REASONS[CODE_KEYS_UNAVAILABLE], message: `flashgate-verifier: JWK Set unavailable: ${why}` };
  }

  // #instance returns the live instance, building one (configuration and keys
  // applied) when there is none.
  #instance() {
    if (this.#inst !== null) return this.#inst;
    const inst = new Instance(this.#module);
    if (inst.configure(this.#config) !== 0) {
      const msg = decoder.decode(inst.result());
      throw new VerifierError(`flashgate-verifier: configuration rejected: ${msg}`, "bad_config");
    }
    if (this.#keys !== null && inst.setKeys(this.#keys) !== 0) {
      throw new VerifierError(`flashgate-verifier: JWK Set rejected: ${decoder.decode(inst.result())}`, "bad_keys");
    }
    this.#inst = inst;
    return inst;
  }

  // #call runs fn(instance); after a trap it drops the instance (its heap is
  // in an unknown state: wasm/README.md) and retries once on a fresh one.
  #call(fn) {
    for (let attempt = 0; ; attempt++) {
      try {
        return fn(this.#instance());
      } catch (err) {
        if (!(err instanceof WebAssembly.RuntimeError) || attempt > 0) throw err;
        this.#inst = null;
      }
    }
  }

  #text() {
    return decoder.decode(this.#inst.result());
  }

  #answer(st) {
    if (st === 0) {
      return { code: 0, result: { valid: true, reason: "ok", claims: JSON.parse(this.#text()) } };
    }
    if (st > 0 && st < 100) {
      return { code: st, result: { valid: false, reason: REASONS[st] ?? `code_${st}`, message: this.#text() } };
    }
    const name = GLUE[st] ?? `status_${st}`;
    throw new VerifierError(`flashgate-verifier: verify: ${name}: ${this.#text()}`, name);
  }

  #pure(token, product, user, now) {
    return this.#answer(this.#call((i) => i.call(i.x.verify, token, product, user, now)));
  }

  async #verifyOnce(token, product, user, now) {
    if (this.#subtle === null) return this.#pure(token, product, user, now);
    const st = this.#call((i) => i.call(i.x.verify_begin, token, product, user, now));
    if (st !== STATUS_CHECK_SIGNATURE) return this.#answer(st);
    const inst = this.#inst;
    const rec = inst.result();
    const handle = (rec[0] | (rec[1] << 8) | (rec[2] << 16) | (rec[3] << 24)) >>> 0;
    let valid;
    try {
      let key = this.#cryptoKey(rec.subarray(4, 36));
      if (typeof key.then === "function") key = await key;
      valid = this.#subtle.verify(ED25519, key, rec.subarray(36, 100), rec.subarray(100));
      if (typeof valid !== "boolean") valid = await valid; // WebCrypto: a Promise; node:crypto: a boolean
    } catch {
      valid = null; // the host could not check it (e.g. a key WebCrypto will not import)
    }
    if (typeof valid === "boolean" && inst === this.#inst) {
      const fst = this.#call((i) => i.x.verify_finish(handle, valid ? 1 : 0));
      if (fst !== STATUS_STALE_HANDLE) return this.#answer(fst);
    }
    // Stale handle (over 256 verifications in flight on this instance, or the
    // instance was rebuilt) or no host answer: the module checks it all.
    return this.#pure(token, product, user, now);
  }

  // #cryptoKey returns the imported key for raw (32 bytes): a CryptoKey, or
  // a Promise of one while the import runs. A key set holds a handful of
  // keys, so a linear scan beats hashing.
  #cryptoKey(raw) {
    const ks = this.#cryptoKeys;
    next: for (let i = 0; i < ks.length; i++) {
      const k = ks[i].raw;
      for (let j = 0; j < 32; j++) if (k[j] !== raw[j]) continue next;
      return ks[i].key;
    }
    if (ks.length >= 64) ks.length = 0;
    const entry = { raw: raw.slice(), key: null };
    entry.key = this.#subtle.importKey("raw", entry.raw, ED25519, false, ["verify"]).then(
      (key) => (entry.key = key),
      (err) => {
        const at = ks.indexOf(entry);
        if (at >= 0) ks.splice(at, 1);
        throw err;
      },
    );
    ks.push(entry);
    return entry.key;
  }

  // #refresh fetches the JWK Set (or joins the fetch in flight). forced marks
  // a refresh asked for by an unknown kid or missing keys: at most one starts
  // per minRefreshIntervalMs, as in verifier/remote (a rotation is picked up
  // at once even right after a routine fetch, and a flood of forged kids
  // costs the issuer one fetch per interval).
  #refresh(forced) {
    if (this.#inflight) return this.#inflight;
    if (forced) {
      const now = this.#clock();
      if (now - this.#forcedAt < this.#minRefresh) {
        return Promise.reject(this.#lastError ?? new Error("JWK Set refresh rate-limited"));
      }
      this.#forcedAt = now;
    }
    this.#fetches++;
    const p = this.#fetchKeys().then(
      (ageMs) => {
        this.#lastError = null;
        this.#fetchedAt = this.#clock();
        // max-age, within [minRefreshIntervalMs, maxKeysAgeMs]; without one, maxKeysAgeMs.
        const age = ageMs === null ? this.#maxKeysAge : Math.min(Math.max(ageMs, this.#minRefresh), this.#maxKeysAge);
        this.#dueAt = this.#fetchedAt + age;
      },
      (err) => {
        this.#lastError = err;
        this.#fetchedAt = this.#clock();
        // Retry no sooner than minRefreshIntervalMs; keep any keys we have.
        this.#dueAt = this.#fetchedAt + this.#minRefresh;
        throw err;
      },
    );
    const done = p.finally(() => {
      if (this.#inflight === done) this.#inflight = null;
    });
    this.#inflight = done;
    return done;
  }

  // #get fetches url with options.fetch, bounded by fetchTimeoutMs.
  #get(url, accept) {
    const init = { headers: { accept } };
    if (typeof AbortSignal !== "undefined" && typeof AbortSignal.timeout === "function") {
      init.signal = AbortSignal.timeout(this.#fetchTimeout);
    }
    return this.#fetch(url, init);
  }

  #refreshDirectives() {
    if (this.#dirInflight) return this.#dirInflight;
    this.#dirFetches++;
    const p = this.#fetchDirectives().then(
      ({ rooms, ageMs }) => {
        this.#dir = rooms;
        this.#dirError = null;
        this.#dirFailedAt = null;
        this.#dirDue = this.#clock() + (ageMs === null ? this.#dirMaxAge : ageMs);
      },
      (err) => {
        this.#dirError = err;
        this.#dirFailedAt = this.#clock();
        throw err;
      },
    );
    const done = p.finally(() => {
      if (this.#dirInflight === done) this.#dirInflight = null;
    });
    this.#dirInflight = done;
    return done;
  }

  // #fetchDirectives GETs the document {"rooms":{"<room>":{"not_before":<Unix s>}}}.
  async #fetchDirectives() {
    const res = await this.#get(this.#dirUrl, "application/json");
    if (!res.ok) throw new Error(`GET ${this.#dirUrl}: HTTP ${res.status}`);
    const doc = JSON.parse(await res.text());
    if (!doc || typeof doc.rooms !== "object" || doc.rooms === null || Array.isArray(doc.rooms)) {
      throw new Error(`GET ${this.#dirUrl}: no "rooms" object`);
    }
    const rooms = new Map();
    for (const [room, d] of Object.entries(doc.rooms)) {
      if (!d || !Number.isSafeInteger(d.not_before)) throw new Error(`GET ${this.#dirUrl}: room ${JSON.stringify(room)}: not_before is not an integer`);
      rooms.set(room, d.not_before);
    }
    return { rooms, ageMs: maxAgeMs(res) };
  }

  async #fetchKeys() {
    const res = await this.#get(this.#jwksUrl, "application/jwk-set+json, application/json");
    if (!res.ok) throw new Error(`GET ${this.#jwksUrl}: HTTP ${res.status}`);
    const body = new Uint8Array(await res.arrayBuffer());
    this.setKeys(body); // the module validates it; a rejected set keeps the old keys
    return maxAgeMs(res);
  }
}

const CREATE = Symbol("Verifier.create");

// ---------------------------------------------------------------------------
// Join receipts of the pre-queue lottery (README.md#join-receipts).

const RECEIPT_TYPE = "fg-receipt+jwt";
const ADMISSION_TYPE = "flashgate-admission+jwt";
const COMMITMENT_DOMAIN = "flashgate lottery commitment v1\0";
const MAX_RECEIPT = 4096;

/** Why verifyReceipt refused (ReceiptError.reason), as `flashgate lottery verify` names them. */
export const RECEIPT_REASONS = Object.freeze([
  "receipt_invalid",
  "other_room",
  "not_drawn",
  "seed_mismatch",
  "not_in_prequeue",
  "input_unavailable",
]);

/** Thrown by verifyReceipt for a receipt it refuses, with the reason. */
export class ReceiptError extends Error {
  constructor(message, reason) {
    super(`flashgate-verifier: ${message}`);
    this.name = "ReceiptError";
    this.reason = reason;
  }
}

function b64urlBytes(s) {
  if (typeof s !== "string" || !/^[A-Za-z0-9_-]*$/.test(s) || s.length % 4 === 1) return null;
  const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (s.length % 4)) % 4));
  const b = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
  return b;
}

function jsonOf(bytes) {
  try {
    const v = JSON.parse(decoder.decode(bytes));
    return v !== null && typeof v === "object" && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

// publicDoc reads a public JSON document: an http(s) URL (fetched), JSON
// text, bytes, or the parsed object.
async function publicDoc(src, what) {
  const unavailable = (why) => new ReceiptError(`${what}: ${why}`, "input_unavailable");
  if (typeof src === "string" && /^https?:\/\//.test(src)) {
    let res;
    try {
      res = await fetch(src, { headers: { accept: "application/json" } });
    } catch (err) {
      throw unavailable(`GET ${src}: ${err.message}`);
    }
    if (!res.ok) throw unavailable(`GET ${src}: HTTP ${res.status}`);
    src = new Uint8Array(await res.arrayBuffer());
  }
  if (typeof src === "string") src = encoder.encode(src);
  if (src instanceof ArrayBuffer) src = new Uint8Array(src);
  if (src instanceof Uint8Array) {
    const v = jsonOf(src);
    if (!v) throw unavailable("not a JSON object");
    return v;
  }
  if (src !== null && typeof src === "object") return src;
  throw unavailable("missing");
}

async function digestHex(alg, text) {
  const d = new Uint8Array(await globalThis.crypto.subtle.digest(alg, encoder.encode(text)));
  let s = "";
  for (const x of d) s += x.toString(16).padStart(2, "0");
  return s;
}

/**
 * The public commitment to a room's lottery seed: lowercase hex SHA-256 of
 * "flashgate lottery commitment v1" NUL room NUL epoch NUL seed.
 */
export function lotteryCommitment(room, epoch, seed) {
  return digestHex("SHA-256", `${COMMITMENT_DOMAIN}${room}\0${epoch}\0${seed}`);
}

const ENTRANT_DOMAIN = "flashgate lottery entrant v2\0";
const SEED_DOMAIN = "flashgate lottery seed v2\0";
/** The room view's randomness of a lottery without a beacon. */
export const OPERATOR_CHOSEN = "operator-chosen seed";

function hexBytes(h) {
  if (typeof h !== "string" || h.length % 2 !== 0 || !/^[0-9a-f]*$/.test(h)) return null;
  const b = new Uint8Array(h.length / 2);
  for (let i = 0; i < b.length; i++) b[i] = parseInt(h.slice(2 * i, 2 * i + 2), 16);
  return b;
}

async function digestBytesHex(bytes) {
  const d = new Uint8Array(await globalThis.crypto.subtle.digest("SHA-256", bytes));
  let s = "";
  for (const x of d) s += x.toString(16).padStart(2, "0");
  return s;
}

/**
 * An entrant's leaf in the entrant digest (docs/rooms.md#the-draw-bit-for-bit, step 3):
 * lowercase hex SHA-256 of "flashgate lottery entrant v2" NUL room NUL epoch NUL seq NUL user.
 */
export function entrantLeaf(room, epoch, seq, user) {
  return digestHex("SHA-256", `${ENTRANT_DOMAIN}${room}\0${epoch}\0${seq}\0${user}`);
}

/** The entrant digest of [{seq, user}] in ascending seq: SHA-256 of the lines `seq " " leaf "\n"`. */
export async function entrantDigest(room, epoch, entrants) {
  let text = "";
  for (const e of entrants) text += `${e.seq} ${await entrantLeaf(room, epoch, e.seq, e.user)}\n`;
  return digestHex("SHA-256", text);
}

/**
 * The draw's seed (step 5): the first 32 hex digits of SHA-256("flashgate lottery seed v2" NUL
 * room NUL epoch NUL secret NUL randomness NUL entrants); randomness "" without a beacon.
 */
export async function lotterySeed(room, epoch, secret, randomness, entrants) {
  return (await digestHex("SHA-256", `${SEED_DOMAIN}${room}\0${epoch}\0${secret}\0${randomness}\0${entrants}`)).slice(0, 32);
}

/** A drand round's randomness (step 4): hex SHA-256 of its signature's bytes, or null if not hex. */
export async function beaconRandomness(signatureHex) {
  const b = hexBytes(signatureHex);
  return b && b.length === 48 ? digestBytesHex(b) : null;
}

/**
 * The drawn place (1-based) of arrival number seq among arrival numbers
 * 1 … cutoff of a lottery with seed in a room of epoch — the order of
 * score(s) = −2^53 + h(s)·2^bits + s, h(s) the top 53 − bits bits of the
 * first 52 bits of SHA-1(seed ":" epoch ":" s) (issuer.LotteryPlace).
 */
export async function lotteryPlace(seed, epoch, cutoff, seq) {
  let bits = 1;
  while (2 ** bits <= cutoff) bits++;
  const div = 2 ** (bits - 1);
  const h = async (s) => Math.floor(parseInt((await digestHex("SHA-1", `${seed}:${epoch}:${s}`)).slice(0, 13), 16) / div);
  const mine = await h(seq);
  let place = 1;
  for (let from = 1; from <= cutoff; from += 4096) {
    const batch = [];
    for (let s = from; s < from + 4096 && s <= cutoff; s++) batch.push(s);
    const hs = await Promise.all(batch.map(h));
    hs.forEach((x, i) => {
      if (x < mine || (x === mine && batch[i] < seq)) place++;
    });
  }
  return place;
}

/**
 * Checks a join receipt from public data alone (`flashgate lottery verify`):
 * its Ed25519 signature (typ fg-receipt+jwt) against the issuer's JWK Set,
 * its room and epoch against the public room view (GET /v1/rooms/{room}),
 * that the view's seed hashes to the commitment the receipt carries, and
 * that its arrival is in the drawn pre-queue; resolves to the claims and
 * the drawn place. Rejects with a ReceiptError (reason in RECEIPT_REASONS),
 * or a VerifierError when the host has no Ed25519 (options.subtle).
 */
export async function verifyReceipt(receipt, { jwks, roomView, subtle, beaconCheck } = {}) {
  const invalid = (why) => new ReceiptError(`receipt invalid: ${why}`, "receipt_invalid");
  const set = await publicDoc(jwks, "JWK Set");
  const view = await publicDoc(roomView, "room view");
  if (typeof receipt !== "string" || receipt.length > MAX_RECEIPT) throw invalid("not a receipt string (at most 4096 characters)");
  const parts = receipt.trim().split(".");
  if (parts.length !== 3) throw invalid("not a compact JWS");
  const hb = b64urlBytes(parts[0]);
  const pb = b64urlBytes(parts[1]);
  const sig = b64urlBytes(parts[2]);
  if (!hb || !pb || !sig || sig.length !== 64) throw invalid("malformed");
  const h = jsonOf(hb);
  if (!h || Object.keys(h).some((k) => k !== "alg" && k !== "kid" && k !== "typ")) throw invalid("malformed header");
  if (h.typ === ADMISSION_TYPE) throw invalid(`an admission token, not a ${RECEIPT_TYPE}`);
  if (h.typ !== RECEIPT_TYPE) throw invalid(`not a ${RECEIPT_TYPE} (typ ${JSON.stringify(h.typ)})`);
  if (h.alg !== "EdDSA") throw invalid("algorithm not accepted");
  const jwk = (Array.isArray(set.keys) ? set.keys : []).find(
    (k) => k && k.kid === h.kid && k.kty === "OKP" && k.crv === "Ed25519",
  );
  const raw = jwk && b64urlBytes(jwk.x);
  if (!raw || raw.length !== 32) throw invalid(`signed by a key that is not published (kid ${JSON.stringify(h.kid)})`);
  const crypto = await hostSubtle({ subtle });
  if (!crypto) throw new VerifierError("flashgate-verifier: this host has no Ed25519 (pass options.subtle)", "bad_options");
  const key = await crypto.importKey("raw", raw, ED25519, false, ["verify"]);
  if (!(await crypto.verify(ED25519, key, sig, encoder.encode(`${parts[0]}.${parts[1]}`)))) throw invalid("signature invalid");
  const c = jsonOf(pb);
  if (
    !c ||
    typeof c.room !== "string" || !c.room ||
    typeof c.epoch !== "string" || !c.epoch ||
    !Number.isSafeInteger(c.arrival) || c.arrival <= 0 ||
    typeof c.commitment !== "string" || !/^[0-9a-f]{64}$/.test(c.commitment)
  ) {
    throw invalid("claims incomplete");
  }
  if (c.room !== view.room || c.epoch !== view.epoch) {
    throw new ReceiptError(
      `receipt for room ${JSON.stringify(c.room)} epoch ${JSON.stringify(c.epoch)}, room view of ${JSON.stringify(view.room)} epoch ${JSON.stringify(view.epoch)}`,
      "other_room",
    );
  }
  const l = view.lottery;
  if (!l || l.drawn !== true || typeof l.seed !== "string" || !l.seed) {
    throw new ReceiptError(`lottery not drawn yet: room ${JSON.stringify(view.room)} shows no seed`, "not_drawn");
  }
  const secret = typeof l.secret === "string" && l.secret ? l.secret : l.seed; // a lottery of before derived secrets: the seed
  const got = await lotteryCommitment(c.room, c.epoch, secret);
  if (got !== c.commitment) {
    throw new ReceiptError(`seed does not match the receipt's commitment: SHA-256 is ${got}, the receipt committed to ${c.commitment}`, "seed_mismatch");
  }
  const named = typeof l.randomness === "string" && l.randomness ? l.randomness : OPERATOR_CHOSEN;
  if (typeof c.randomness === "string" && c.randomness && c.randomness !== named) {
    throw new ReceiptError(`the receipt promised randomness ${JSON.stringify(c.randomness)}, the room shows ${JSON.stringify(named)}`, "seed_mismatch");
  }
  let randomness = "";
  const drand = named !== OPERATOR_CHOSEN;
  if (drand) {
    if (beaconCheck) {
      await beaconCheck(l);
    } else {
      let mod;
      try {
        mod = await import("./beacon.js"); // @noble/curves, loaded only for a beacon draw
      } catch (err) {
        throw new ReceiptError(`no BLS12-381 to check the beacon with (@noble/curves): ${err.message}`, "input_unavailable");
      }
      if (!(await mod.verifyBeacon(l.beacon, l.beacon_round, l.beacon_signature))) {
        throw new ReceiptError(`beacon round ${l.beacon_round}: signature does not verify under the chain's public key`, "seed_mismatch");
      }
    }
    randomness = await beaconRandomness(l.beacon_signature);
    if (!randomness) throw new ReceiptError(`beacon round ${l.beacon_round}: no signature`, "seed_mismatch");
  }
  if (drand || l.entrants) {
    const want = await lotterySeed(c.room, c.epoch, secret, randomness, l.entrants || "");
    if (want !== l.seed) {
      throw new ReceiptError(`secret, beacon and entrants give seed ${want}, the room drew with ${l.seed}`, "seed_mismatch");
    }
  }
  const cutoff = l.cutoff;
  if (!Number.isSafeInteger(cutoff) || c.arrival > cutoff) {
    throw new ReceiptError(`arrival ${c.arrival} not in the drawn pre-queue (cutoff ${cutoff})`, "not_in_prequeue");
  }
  return {
    iss: c.iss,
    room: c.room,
    epoch: c.epoch,
    user: c.sub,
    arrival: c.arrival,
    iat: c.iat,
    commitment: c.commitment,
    kid: h.kid,
    cutoff,
    place: await lotteryPlace(l.seed, c.epoch, cutoff, c.arrival),
    randomness,
    influence: typeof l.influence === "string" && l.influence ? l.influence : (drand ? "none" : "every place: the seed is operator-chosen (no public beacon)"),
  };
}

// ---------------------------------------------------------------------------
// Room beacons (README.md#room-beacons): GET /v1/rooms/{room}/beacon, one
// public signed document per room that a CDN caches and a waiting page places
// itself from (docs/browser.md#the-room-beacon in the flashgate repository).

const BEACON_TYPE = "flashgate-beacon+jwt";
const MAX_BEACON = 8192;
const MAX_BEACON_LIFETIME_S = 60;

/**
 * Checks a room beacon (a compact JWS, typ flashgate-beacon+jwt) against a JWK
 * Set: header exactly alg EdDSA, kid and typ (an admission token, invite or
 * join receipt is refused: bad_type), the Ed25519 signature, iss, room (any
 * when options.room is empty), iat ≤ now + leeway, now ≤ exp + leeway and
 * exp − iat ≤ 60 s. Resolves to {valid: true, beacon} (the payload) or
 * {valid: false, reason, message}, reason one of malformed, bad_type,
 * unsupported_alg, unknown_key, bad_signature, invalid_claims, bad_issuer,
 * bad_room, expired, not_yet_valid, lifetime_too_long. Rejects with a
 * VerifierError when the host has no Ed25519 (options.subtle).
 * @param {string} beacon
 * @param {{jwks: {keys: object[]} | string | Uint8Array, issuer: string, room?: string, now?: number, leewaySeconds?: number, subtle?: SubtleCrypto}} options
 */
export async function verifyRoomBeacon(beacon, { jwks, issuer, room = "", now = Date.now(), leewaySeconds = 0, subtle } = {}) {
  const no = (reason, message) => ({ valid: false, reason, message });
  const set = typeof jwks === "string" || jwks instanceof Uint8Array ? jsonOf(typeof jwks === "string" ? encoder.encode(jwks) : jwks) : jwks;
  if (typeof beacon !== "string" || beacon.length > MAX_BEACON) return no("malformed", "not a beacon string (at most 8192 characters)");
  const parts = beacon.trim().split(".");
  if (parts.length !== 3) return no("malformed", "not a compact JWS");
  const hb = b64urlBytes(parts[0]);
  const pb = b64urlBytes(parts[1]);
  const sig = b64urlBytes(parts[2]);
  if (!hb || !pb || !sig || sig.length !== 64) return no("malformed", "malformed");
  const h = jsonOf(hb);
  if (!h || Object.keys(h).some((k) => k !== "alg" && k !== "kid" && k !== "typ")) return no("malformed", "malformed header");
  if (h.alg !== "EdDSA") return no("unsupported_alg", `alg ${JSON.stringify(h.alg)}`);
  if (h.typ !== BEACON_TYPE) return no("bad_type", `not a ${BEACON_TYPE} (typ ${JSON.stringify(h.typ)})`);
  const jwk = (Array.isArray(set?.keys) ? set.keys : []).find((k) => k && k.kid === h.kid && k.kty === "OKP" && k.crv === "Ed25519");
  const raw = jwk && b64urlBytes(jwk.x);
  if (!raw || raw.length !== 32) return no("unknown_key", `kid ${JSON.stringify(h.kid)} is not in the JWK Set`);
  const crypto = await hostSubtle({ subtle });
  if (!crypto) throw new VerifierError("flashgate-verifier: this host has no Ed25519 (pass options.subtle)", "bad_options");
  const key = await crypto.importKey("raw", raw, ED25519, false, ["verify"]);
  if (!(await crypto.verify(ED25519, key, sig, encoder.encode(`${parts[0]}.${parts[1]}`)))) return no("bad_signature", "signature invalid");
  const b = jsonOf(pb);
  if (!b || !Number.isSafeInteger(b.iat) || !Number.isSafeInteger(b.exp) || b.iat <= 0 || b.exp <= b.iat || !Array.isArray(b.buckets)) {
    return no("invalid_claims", "iat, exp or buckets missing");
  }
  if (b.iss !== issuer) return no("bad_issuer", `iss ${JSON.stringify(b.iss)}`);
  if (room && b.room !== room) return no("bad_room", `a beacon of room ${JSON.stringify(b.room)}`);
  if (b.exp - b.iat > MAX_BEACON_LIFETIME_S) return no("lifetime_too_long", `${b.exp - b.iat} s`);
  const s = Math.floor(now / 1000);
  if (s > b.exp + leewaySeconds) return no("expired", `exp ${b.exp}`);
  if (b.iat > s + leewaySeconds) return no("not_yet_valid", `iat ${b.iat}`);
  return { valid: true, beacon: b };
}
