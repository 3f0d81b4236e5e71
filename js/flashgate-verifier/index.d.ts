// Type declarations for flashgate-verifier (index.js). See README.md.

/** The wasm ABI version this package speaks (wasm/README.md). */
export declare const ABI_VERSION: 2;

/**
 * Why a token was refused, by module code (verifier/errors.go; stable,
 * only ever appended). "ok" for an accepted token.
 */
export type Reason =
  | "ok"
  | "too_large"
  | "malformed"
  | "duplicate_key"
  | "unsupported_alg"
  | "forbidden_header"
  | "bad_type"
  | "unknown_key"
  | "bad_signature"
  | "bad_issuer"
  | "bad_audience"
  | "bad_product"
  | "bad_user"
  | "invalid_claims"
  | "expired"
  | "not_yet_valid"
  | "lifetime_too_long"
  | "keys_unavailable"
  | "room_stopped"
  | "directives_unavailable";

/** Every Reason, indexed by the module's code (REASONS[0] === "ok"). */
export declare const REASONS: readonly Reason[];

/** How flashgate answers a refused token over HTTP (problem.Token). */
export interface Problem {
  status: number;
  title: string;
  /** WWW-Authenticate value (RFC 6750 §3), "" for none. */
  challenge: string;
  /** Retry-After in seconds, 0 for none. */
  retryAfter: number;
}

/** The HTTP answer for each refusal reason, and for "missing" (no token). */
export declare const PROBLEMS: Readonly<Record<Exclude<Reason, "ok"> | "missing", Problem>>;

/**
 * The RFC 9457 problem response for a refused token (type
 * https://flashgate.dev/problems/token-<reason>, a `reason` member, the
 * headers of PROBLEMS, Cache-Control: no-store). detail is echoed as is.
 */
export declare function refusal(reason: Exclude<Reason, "ok"> | "missing", detail?: string): Response;

/** Defaults of the VerifierOptions timings, in milliseconds. */
export declare const DEFAULTS: Readonly<{
  minRefreshIntervalMs: 10000;
  maxKeysAgeMs: 300000;
  fetchTimeoutMs: 5000;
  directivesMaxAgeMs: 5000;
  directivesRetryMs: 1000;
}>;

/** A JWK Set (RFC 7517 §5): {"keys": [...]}, Ed25519 OKP keys. */
export type JWKSet = string | Uint8Array | ArrayBuffer | { keys: object[] };

/** Where the wasm module comes from. */
export type WasmSource =
  | WebAssembly.Module
  | ArrayBuffer
  | ArrayBufferView
  | Response
  | URL
  | string
  | Promise<WebAssembly.Module | ArrayBuffer | ArrayBufferView | Response | URL | string>;

export interface VerifierOptions {
  /** Required exact `iss`. */
  issuer: string;
  /** Required exact `aud` (a single string). */
  audience: string;
  /** Product expected when verify() is given none. */
  product?: string;
  /** Clock leeway on exp, iat and nbf, whole seconds, 0–60. Default 0. */
  leewaySeconds?: number;
  /** Maximum exp − iat, whole seconds. Default (0 or absent) 900. */
  maxLifetimeSeconds?: number;

  /** A static JWK Set. Exactly one of jwks and jwksUrl. */
  jwks?: JWKSet;
  /**
   * The issuer's JWK Set URL (e.g. https://queue.example.com/.well-known/jwks.json),
   * fetched at create(), refreshed Cache-Control max-age after each fetch
   * (bounded to [minRefreshIntervalMs, maxKeysAgeMs]; maxKeysAgeMs without one) and on an unknown kid
   * (at most once per minRefreshIntervalMs, one fetch in flight).
   */
  jwksUrl?: string | URL;
  /** The fetch used for jwksUrl (e.g. a service binding's fetch). Default globalThis.fetch. */
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  /** Least time between two forced JWK Set fetches, ms. Default 10,000. */
  minRefreshIntervalMs?: number;
  /**
   * Longest a fetched JWK Set is used before a refresh is due, ms: the
   * response's Cache-Control max-age within [minRefreshIntervalMs, this],
   * this when it has none. Default 300,000 (5 min).
   */
  maxKeysAgeMs?: number;
  /** Bound on one JWK Set fetch, ms. Default 5,000. */
  fetchTimeoutMs?: number;
  /** Clock for the JWK Set and directive caches, ms since the epoch. Default Date.now. */
  clock?: () => number;

  /**
   * The issuer's edge directive document
   * (e.g. https://queue.example.com/.well-known/flashgate-directives.json:
   * {"rooms":{"<room>":{"not_before":<Unix seconds>}}}), fetched with `fetch`
   * at create() and again at the first verify() after its Cache-Control
   * max-age (one fetch in flight). An accepted token whose iat is before its
   * room's not_before becomes room_stopped (an operator's stop). A failed
   * fetch keeps the last document (retried after directivesRetryMs, verify
   * does not wait meanwhile); before the first good one verify answers
   * directives_unavailable: never fail open. Absent: no directive check.
   */
  directivesUrl?: string | URL;
  /** How long a directive document without max-age is used, ms. Default 5,000. */
  directivesMaxAgeMs?: number;
  /** Least time after a failed directive fetch before the next, ms. Default 1,000. */
  directivesRetryMs?: number;

  /**
   * The module. Default: flashgate-verifier.wasm next to index.js (read from
   * disk in Node, fetched elsewhere). In a Cloudflare Worker pass the module
   * imported with `import wasm from "flashgate-verifier/flashgate-verifier.wasm"`
   * (Workers cannot compile wasm from bytes at run time).
   */
  wasm?: WasmSource;
  /**
   * "auto" (default): the runtime's Ed25519 when it has one (node:crypto in
   * Node, else WebCrypto), else the module's own. "host": require the
   * runtime's (create() rejects without it). "pure": always the module's.
   */
  crypto?: "auto" | "host" | "pure";
  /** The SubtleCrypto for the host path (tests, unusual hosts). Default globalThis.crypto.subtle. */
  subtle?: SubtleCrypto;
}

export interface VerifyOptions {
  /**
   * The product the request is for. Default: VerifierOptions.product.
   * verify judges this string only, never a path: take it from the very
   * path the deployment forwards to the origin, and forward that path, not
   * the client's spelling (an origin that decodes %2F or keeps dot segments
   * routes the spelling elsewhere; examples/cloudflare-worker/README.md#paths).
   */
  product?: string;
  /** When set, the token's sub must equal it. */
  user?: string;
  /** The current time: a Date or **milliseconds** since the epoch. Default Date.now(). */
  now?: Date | number;
}

/** The claims of an accepted token (times in Unix seconds). */
export interface Claims {
  /** The key id that signed it. */
  kid: string;
  iss: string;
  aud: string;
  /** The user. */
  sub: string;
  /** The product (waiting room id). */
  product: string;
  /** The admission id. */
  jti: string;
  /** Issued at, Unix seconds. */
  iat: number;
  /** Expires at, Unix seconds. */
  exp: number;
}

export type VerifyResult =
  | { valid: true; reason: "ok"; claims: Claims }
  | {
      valid: false;
      reason: Exclude<Reason, "ok">;
      /** A diagnostic for logs: not stable, may echo attacker-controlled bytes. */
      message: string;
    };

/** Misuse or misconfiguration; a refused token is a VerifyResult instead. */
export declare class VerifierError extends Error {
  /** "bad_options", "bad_module", "bad_keys", "bad_config", "bad_argument", "not_ready", … */
  readonly code: string;
}

/** Whether this runtime's WebCrypto verifies Ed25519 (probed once, RFC 8032 §7.1 TEST 1). */
export declare function hostCryptoAvailable(): Promise<boolean>;

export declare class Verifier {
  private constructor();
  /**
   * Builds a Verifier. Rejects with VerifierError on bad options, a rejected
   * configuration or JWK Set, or a module of another ABI. A failed first
   * fetch of jwksUrl does not reject: verify() answers keys_unavailable.
   */
  static create(options: VerifierOptions): Promise<Verifier>;
  /** "host": signatures checked with the runtime's Ed25519; "pure": inside the module. */
  readonly crypto: "host" | "pure";
  /** Who checks signatures: node:crypto (Node), WebCrypto, options.subtle, or the module. */
  readonly provider: "node:crypto" | "webcrypto" | "subtle" | "wasm";
  /** The last JWK Set fetch error, null after a successful fetch. */
  readonly keysError: Error | null;
  /** JWK Set fetches started so far. */
  readonly keysFetches: number;
  /** The JWK Set in use (parsed), null before the first one: what verifyRoomBeacon checks against. */
  readonly jwks: { keys: object[] } | null;
  /** The last directive fetch error, null after a successful fetch (directivesUrl). */
  readonly directivesError: Error | null;
  /** Directive fetches started so far (directivesUrl). */
  readonly directivesFetches: number;
  /** Fetches directivesUrl now (or joins the fetch in flight). */
  refreshDirectives(): Promise<void>;
  /** Verifies a compact admission token. */
  verify(token: string, options?: VerifyOptions): Promise<VerifyResult>;
  /** Replaces the key set; throws VerifierError("bad_keys") and keeps the old one if rejected. */
  setKeys(jwks: JWKSet): void;
  /** Fetches jwksUrl now (or joins the fetch in flight). */
  refreshKeys(): Promise<void>;
}

/** Why verifyReceipt refused a join receipt (ReceiptError.reason). */
export type ReceiptReason =
  | "receipt_invalid"
  | "other_room"
  | "not_drawn"
  | "seed_mismatch"
  | "not_in_prequeue"
  | "input_unavailable";

/** Every ReceiptReason. */
export declare const RECEIPT_REASONS: readonly ReceiptReason[];

/** Thrown by verifyReceipt for a receipt it refuses. */
export declare class ReceiptError extends Error {
  readonly reason: ReceiptReason;
}

/** The public room view, GET /v1/rooms/{room}. */
export interface RoomView {
  room: string;
  epoch?: string;
  pre_queue: "fifo" | "shuffle";
  /** Deprecated: pre_queue under its old name (one release). */
  prequeue?: "fifo" | "shuffle";
  lottery?: {
    /** SHA-256 hex of "flashgate lottery commitment v1" NUL room NUL epoch NUL seed. */
    commitment: string;
    /** Deprecated: SHA-1 hex of the seed alone (one release). */
    commitment_sha1: string;
    drawn: boolean;
    /** Once drawn. */
    seed?: string;
    cutoff?: number;
    bits?: number;
    drawn_at_ms?: number;
    placed_at_ms?: number;
    /** "drand:<chain hash>" or "operator-chosen seed". */
    randomness?: string;
    beacon?: { hash: string; public_key: string; genesis_time: number; period: number };
    beacon_round?: number;
    beacon_signature?: string;
    entrants?: string;
    entrant_count?: number;
    fixed_at_ms?: number;
    secret?: string;
    influence?: string;
  };
}

/** What verifyReceipt proved. */
export interface ReceiptResult {
  iss: string;
  room: string;
  epoch: string;
  /** The user id (sub). */
  user: string;
  /** The entry's arrival number. */
  arrival: number;
  /** Seconds since the epoch: when the receipt was signed. */
  iat: number;
  commitment: string;
  kid: string;
  /** The last arrival number in the pre-queue. */
  cutoff: number;
  /** The drawn place (1-based) among arrival numbers 1 … cutoff. */
  place: number;
  /** The beacon round's randomness (hex; "" without a beacon). */
  randomness: string;
  /** Which places whoever runs the issuer could have steered ("none" with a beacon). */
  influence: string;
}

/** A public JSON document: an http(s) URL to fetch, JSON text or bytes, or the parsed object. */
export type PublicDoc<T> = string | Uint8Array | T;

/**
 * Checks a join receipt from public data alone: signature (typ
 * fg-receipt+jwt) against the JWK Set, room and epoch against the room
 * view, SHA-256 of the view's seed against the receipt's commitment, the
 * arrival against the cutoff; resolves to the drawn place. Rejects with
 * ReceiptError, or VerifierError("bad_options") without host Ed25519.
 */
export declare function verifyReceipt(
  receipt: string,
  options: {
    jwks: PublicDoc<JWKSet>;
    roomView: PublicDoc<RoomView>;
    subtle?: SubtleCrypto;
    /**
     * Checks the view's drand round's BLS signature against the chain's public key (the package
     * carries no BLS12-381 code: pass one, e.g. built on @noble/curves); rejects to refuse.
     * Without it the round's signature is hashed into the seed but not checked against the key.
     */
    beaconCheck?: (lottery: NonNullable<RoomView["lottery"]>) => Promise<void>;
  },
): Promise<ReceiptResult>;

/** The randomness name of a lottery without a beacon. */
export declare const OPERATOR_CHOSEN: "operator-chosen seed";

/** An entrant's leaf: SHA-256 hex of "flashgate lottery entrant v2" NUL room NUL epoch NUL seq NUL user. */
export declare function entrantLeaf(room: string, epoch: string, seq: number, user: string): Promise<string>;

/** The entrant digest of the pre-queue at the cutoff, in ascending seq. */
export declare function entrantDigest(room: string, epoch: string, entrants: { seq: number; user: string }[]): Promise<string>;

/** The draw's seed: 32 hex digits of SHA-256 over secret, beacon randomness ("" none) and entrant digest. */
export declare function lotterySeed(room: string, epoch: string, secret: string, randomness: string, entrants: string): Promise<string>;

/** A drand round's randomness: SHA-256 hex of its 48-byte signature; null when not such hex. */
export declare function beaconRandomness(signatureHex: string): Promise<string | null>;

/** The lottery commitment: SHA-256 hex, domain-separated by room and epoch. */
export declare function lotteryCommitment(room: string, epoch: string, seed: string): Promise<string>;

/** The drawn place (1-based) of arrival seq among arrivals 1 … cutoff. */
export declare function lotteryPlace(seed: string, epoch: string, cutoff: number, seq: number): Promise<number>;

/** A room beacon's payload (GET /v1/rooms/{room}/beacon; flashgate.BeaconClaims). */
export interface RoomBeacon {
  iss: string;
  room: string;
  /** Unix seconds. */
  iat: number;
  /** Unix seconds: a copy past it is stale. */
  exp: number;
  state: "open" | "paused" | "closed";
  page_message?: string;
  close_reason?: string;
  opens_at_ms?: number;
  ended_at_ms?: number;
  total_waiting: number;
  priority: number;
  head: number;
  tail: number;
  exact_through: number;
  drawn_ahead: number;
  closed_through: number;
  near_head: number;
  /** [through, waiting] pairs: waiting public entries with an arrival number in (exact_through, through]. */
  buckets: [number, number][];
}

/** Why verifyRoomBeacon refused a beacon. */
export type RoomBeaconReason =
  | "malformed"
  | "bad_type"
  | "unsupported_alg"
  | "unknown_key"
  | "bad_signature"
  | "invalid_claims"
  | "bad_issuer"
  | "bad_room"
  | "expired"
  | "not_yet_valid"
  | "lifetime_too_long";

/**
 * Checks a room beacon (typ flashgate-beacon+jwt) against a JWK Set: its
 * Ed25519 signature, issuer, room (any when empty), iat/exp at now (ms).
 */
export declare function verifyRoomBeacon(
  beacon: string,
  options: {
    jwks: { keys: object[] } | string | Uint8Array;
    issuer: string;
    room?: string;
    now?: number;
    leewaySeconds?: number;
    subtle?: SubtleCrypto;
  },
): Promise<{ valid: true; beacon: RoomBeacon } | { valid: false; reason: RoomBeaconReason; message: string }>;
