// flashgate-client.js: a dependency-free browser client for flashgate's
// waiting-room API (served by flashgate at GET /flashgate-client.js).
//
//   import { createClient } from "/flashgate-client.js";
//   const fg = createClient({ base: "https://queue.shop.example" });
//   let entry = await fg.enter("sku-1");
//   entry = await fg.updates("sku-1", entry.waiting_token, (e) => render(e));
//   if (entry.state === "ACTIVE") await fg.exchange("sku-1", entry.waiting_token);
//
// Every request is sent with credentials: "include" (the visitor and
// admission cookies). 429 and 503 answers are retried after Retry-After
// (±20 % jitter); other errors are thrown as FlashgateError, which carries
// the RFC 9457 problem document. An enter answered 428 pow_required (visitor
// mode with FLASHGATE_ENTER_POW) is solved here with WebCrypto SHA-256
// (solvePoW) and sent again with the solution: enter resolves as usual,
// only later (opts.onPoW reports the work).

/**
 * The Entry JSON of enter, status and the "status" events.
 * @typedef {object} Entry
 * @property {string} room
 * @property {"WAITING"|"ACTIVE"|"EXPIRED"|"COMPLETED"|"REVOKED"|"CLOSED"|"NOT_FOUND"} state
 * @property {string} [waiting_token]
 * @property {number} [arrival]
 * @property {number} [position] 1 = next in line (WAITING only)
 * @property {boolean} [position_estimated]
 * @property {true} [pre_queue] WAITING in a shuffle room's pre-queue: the place is drawn at opening (position and ahead absent meanwhile)
 * @property {number} [ahead]
 * @property {number} [total_waiting]
 * @property {number} [estimated_wait_ms] the issuer's estimate of the wait, from the room's measured
 *   outflow (the configured pace, and when capacity is the limit the pace slots freed over the last
 *   minute, bounded by the live admissions' expiries); before the opening time it includes the time
 *   until then; −1: unknown (room paused by the operator, or closed, or a pre-queue place not drawn yet)
 * @property {number} [poll_after_ms] the issuer's poll hint
 * @property {number} [opens_at_ms] Unix ms: when the room opens, while that is still ahead (a
 *   countdown: `opens_at_ms - Date.now()`; the page's own clock may be off by a little)
 * @property {string} [admission_id]
 * @property {number} [admission]
 * @property {number} [admitted_at_ms]
 * @property {number} [expires_at_ms]
 * @property {number} [ended_at_ms]
 * @property {"not_claimed"|"session_ended"|"sold_out"|"closed"|"event_ended"|"deleted"} [reason] why an EXPIRED entry ended: not_claimed = admitted but not exchanged within the room's arrival window; why a CLOSED one did (final: the room closed while it waited)
 * @property {"priority"|"public"} [lane] the line a WAITING entry waits in: priority = entered with an invite
 * @property {"open"|"paused"|"closed"} [room_state]
 */

/**
 * The answer of a successful exchange (times in Unix ms, whole seconds as
 * the token's exp and iat are).
 * @typedef {object} Admission
 * @property {string} admission_token
 * @property {string} admission_id
 * @property {number} admission
 * @property {number} expires_at_ms
 * @property {number} issued_at_ms
 * @property {number} expires_at deprecated: expires_at_ms in Unix seconds, for one release
 * @property {number} issued_at deprecated: issued_at_ms in Unix seconds, for one release
 */

/**
 * An RFC 9457 problem document as flashgate sends it.
 * @typedef {object} Problem
 * @property {string} type
 * @property {string} title
 * @property {number} status
 * @property {string} [detail]
 * @property {string} code e.g. "room_closed", "unavailable"; "network" when no answer came
 * @property {string} [reason]
 * @property {number} [position]
 * @property {PoWChallenge} [challenge] the challenge of a pow_required answer
 */

/**
 * An ALTCHA challenge (pow_required's challenge, GET /v1/challenge): the
 * integer n in [0, maxnumber] with hex(SHA-256(salt + n)) === challenge.
 * @typedef {object} PoWChallenge
 * @property {"SHA-256"} algorithm
 * @property {string} challenge
 * @property {number} maxnumber
 * @property {string} salt
 * @property {string} signature
 */

/**
 * What enter's onPoW hears: "solving" before the work starts, "solved" with
 * the milliseconds it took.
 * @typedef {{state: "solving", challenge: PoWChallenge} | {state: "solved", took: number, number: number}} PoWEvent
 */

/** The default wait between polls when an entry carries no poll_after_ms. */
export const DEFAULT_POLL_MS = 2000;
/** The longest backoff after repeated failures. */
export const MAX_BACKOFF_MS = 30000;
/** How often a page polls the room beacon (the issuer's BeaconPoll). */
export const BEACON_POLL_MS = 2000;

/**
 * The room beacon's payload (GET /v1/rooms/{room}/beacon; docs/browser.md#the-room-beacon).
 * @typedef {object} Beacon
 * @property {string} room
 * @property {number} iat Unix seconds: when the figures were read
 * @property {number} exp Unix seconds: a copy past it is stale
 * @property {"open"|"paused"|"closed"} state
 * @property {string} [page_message]
 * @property {string} [close_reason]
 * @property {number} [opens_at_ms]
 * @property {number} total_waiting
 * @property {number} priority the priority lane's length
 * @property {number} head the first waiting arrival number of the public line (0: none)
 * @property {number} tail the last one
 * @property {number} exact_through arrivals up to it are placed by the lottery, not by number
 * @property {number} drawn_ahead entries of the lottery waiting ahead of head
 * @property {number} near_head a page placed at most this far asks its status
 * @property {[number, number][]} buckets [through, waiting]: waiting public entries with an arrival number in (exact_through, through]
 */

/**
 * decodeBeacon returns the payload of a room beacon (a compact JWS) without
 * checking its signature, or null when it is not one. The page trusts the
 * origin it fetched the beacon from: the issuer itself, or an edge worker
 * that verified it (examples/cloudflare-worker).
 * @param {string} jws
 * @returns {Beacon|null}
 */
export function decodeBeacon(jws) {
  const parts = typeof jws === "string" ? jws.trim().split(".") : [];
  if (parts.length !== 3) return null;
  try {
    const b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
    const bin = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
    const b = JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))));
    return b && typeof b === "object" && Array.isArray(b.buckets) ? b : null;
  } catch {
    return null;
  }
}

/**
 * beaconPlace places the public entry with arrival number `arrival` from a
 * beacon (verifier.Beacon.Place): {ok, place, maxErr}. |place − exact| ≤
 * maxErr, the number of arrivals of the entry's bucket no longer waiting (0
 * while none left), exact being the status answer at the beacon's instant.
 * ok is false when the beacon cannot place it: in the lottery's pre-queue, ahead of
 * the head (admitted, left, or in a lane) or after the tail (it arrived
 * after the beacon): the page asks its status.
 * @param {Beacon} b
 * @param {number} arrival
 */
export function beaconPlace(b, arrival) {
  if (!(arrival > b.exact_through) || !(b.head > 0) || arrival < b.head) return { ok: false, place: 0, maxErr: -1 };
  let lo = b.head - 1, below = 0;
  for (const [through, c] of b.buckets) {
    if (arrival <= through) {
      const span = through - lo, w = c - below;
      const x = Math.max(1, Math.ceil(((arrival - lo) * w) / span));
      return { ok: true, place: b.priority + b.drawn_ahead + below + x, maxErr: span - w };
    }
    lo = through;
    below = c;
  }
  return { ok: false, place: b.priority + b.drawn_ahead + below + (arrival - lo), maxErr: -1 };
}

/**
 * beaconChanged: whether a page must ask its status at once, the room's
 * state, message, close reason or opening time having changed between two
 * beacons (or against the page's last entry).
 * @param {Beacon} b
 * @param {Beacon|null} old
 * @param {Entry|null} last
 */
function beaconChanged(b, old, last) {
  if (last?.room_state && last.room_state !== b.state) return true;
  return !!old && (old.state !== b.state || (old.close_reason ?? "") !== (b.close_reason ?? "") ||
    (old.opens_at_ms ?? 0) !== (b.opens_at_ms ?? 0));
}

/** An error answer of the API; problem is the document, code and status its members. */
export class FlashgateError extends Error {
  /**
   * @param {Problem} problem
   * @param {number} [retryAfterMs] from Retry-After, if the answer had one
   */
  constructor(problem, retryAfterMs) {
    super(problem.detail || problem.title || problem.code);
    this.name = "FlashgateError";
    /** @type {Problem} */
    this.problem = problem;
    /** @type {string} */
    this.code = problem.code;
    /** @type {number} */
    this.status = problem.status;
    /** @type {number|undefined} */
    this.retryAfterMs = retryAfterMs;
  }

  /** Whether retrying later may succeed (429, 503, no answer). */
  get retryable() {
    return this.status === 429 || this.status === 503 || this.status === 0;
  }
}

/**
 * @typedef {object} ClientOptions
 * @property {string} [base] the issuer's origin (and path prefix); "" = this page's origin
 * @property {typeof fetch} [fetch] fetch implementation (default globalThis.fetch)
 * @property {any} [EventSource] EventSource constructor (default globalThis.EventSource; null: poll)
 * @property {number} [retries] retries of a 429/503 answer per call (default 4)
 * @property {(ms: number, signal?: AbortSignal) => Promise<void>} [sleep] timer (tests)
 * @property {() => number} [random] jitter source in [0, 1) (tests)
 * @property {((url: string) => boolean)|null} [sendBeacon] navigator.sendBeacon (default: the browser's; null: none)
 * @property {EventTarget} [window] where pagehide is heard (default globalThis)
 * @property {(ch: PoWChallenge, opts?: {signal?: AbortSignal}) => Promise<string>} [solvePoW] the proof-of-work solver (default solvePoW; e.g. ALTCHA's own)
 * @property {any} [BroadcastChannel] BroadcastChannel constructor (default globalThis.BroadcastChannel; null: none)
 */

/**
 * @typedef {object} Client
 * @property {(room: string, opts?: {invite?: string, onPoW?: (ev: PoWEvent) => void, signal?: AbortSignal}) => Promise<Entry>} enter with opts.invite, enters with an invite token (the priority lane, or a bypass admission); a pow_required answer is solved and the enter sent again with the solution (opts.onPoW hears the work, e.g. to show "checking your browser…")
 * @property {(room: string, waitingToken: string) => Promise<Entry>} status
 * @property {(room: string, waitingToken: string, onEntry: (e: Entry) => void, opts?: UpdateOptions) => Promise<Entry>} updates
 * @property {(room: string, waitingToken: string) => Promise<Admission>} exchange
 * @property {(room: string, waitingToken: string) => Promise<void>} leave
 * @property {(room: string, waitingToken: string) => boolean} leaveBeacon
 * @property {(room: string, current: () => (Entry|null|undefined)) => () => void} leaveOnPagehide
 */

/**
 * @typedef {object} UpdateOptions
 * @property {AbortSignal} [signal] stops the updates (the promise rejects with the signal's reason)
 * @property {(err: FlashgateError, last: Entry|null) => void} [onError] a retryable failure: the last entry is kept and updates go on
 * @property {boolean} [beacon] poll the room beacon from the start (the waiting page's data-beacon), as after a Flashgate-Beacon answer
 */

/**
 * jitter returns ms ± 20 %.
 * @param {number} ms
 * @param {() => number} random
 */
export function jitter(ms, random) {
  return Math.round(ms * (0.8 + 0.4 * random()));
}

/**
 * retryAfterMs parses a Retry-After header (delay-seconds or HTTP date).
 * @param {string|null} v
 * @returns {number|undefined}
 */
export function retryAfterMs(v) {
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(0, t - Date.now());
}

/** @param {number} ms @param {AbortSignal} [signal] */
function defaultSleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The largest maxnumber solvePoW takes on (2^26, flashgate's MaxEnterPoW). */
export const MAX_POW_NUMBER = 2 ** 26;

/**
 * solvePoW solves an ALTCHA SHA-256 challenge with WebCrypto: it hashes
 * salt + n for n = 0, 1, … (batches of concurrent digests) until the hash is
 * the challenge, maxnumber / 2 hashes on average. Resolves with the
 * solution, the payload the server (or any ALTCHA verifier) takes: base64 of
 * the JSON {algorithm, challenge, number, salt, signature, took}. Rejects
 * with a FlashgateError (code pow_unsolvable) when no n up to maxnumber
 * fits, the algorithm is not SHA-256 or WebCrypto is missing (an insecure
 * http: origin other than localhost), or with the signal's reason.
 * @param {PoWChallenge} ch
 * @param {{signal?: AbortSignal, batch?: number}} [opts]
 * @returns {Promise<string>}
 */
export async function solvePoW(ch, { signal, batch = 256 } = {}) {
  const fail = (detail) =>
    new FlashgateError({ type: "about:blank", title: "Proof of work not solvable", status: 0, code: "pow_unsolvable", detail });
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) throw fail("WebCrypto is not available (a secure context is required)");
  if (ch?.algorithm !== "SHA-256" || !/^[0-9a-f]{64}$/.test(ch.challenge ?? "") || typeof ch.salt !== "string") {
    throw fail("not a SHA-256 ALTCHA challenge");
  }
  const max = Math.min(Number(ch.maxnumber), MAX_POW_NUMBER);
  const want = new Uint8Array(32);
  for (let i = 0; i < 32; i++) want[i] = parseInt(ch.challenge.slice(2 * i, 2 * i + 2), 16);
  const prefix = new TextEncoder().encode(ch.salt);
  const start = Date.now();
  for (let base = 0; base <= max; base += batch) {
    signal?.throwIfAborted();
    const end = Math.min(base + batch, max + 1);
    const sums = [];
    for (let n = base; n < end; n++) {
      // digest copies its input at the call: each message is its own buffer anyway.
      const digits = String(n);
      const msg = new Uint8Array(prefix.length + digits.length);
      msg.set(prefix);
      for (let i = 0; i < digits.length; i++) msg[prefix.length + i] = digits.charCodeAt(i);
      sums.push(subtle.digest("SHA-256", msg));
    }
    const got = await Promise.all(sums);
    for (let i = 0; i < got.length; i++) {
      const h = new Uint8Array(got[i]);
      let j = 0;
      while (j < 32 && h[j] === want[j]) j++;
      if (j === 32) {
        const number = base + i;
        const { algorithm, challenge, salt, signature } = ch;
        return btoa(JSON.stringify({ algorithm, challenge, number, salt, signature, took: Date.now() - start }));
      }
    }
  }
  throw fail(`no number up to ${max} solves the challenge`);
}

/** @param {number} failures */
function backoff(failures) {
  return Math.min(MAX_BACKOFF_MS, 1000 * 2 ** Math.max(0, failures - 1));
}

/**
 * createClient returns a client of the flashgate API at base.
 * @param {ClientOptions} [opts]
 * @returns {Client}
 */
export function createClient(opts = {}) {
  const base = (opts.base ?? "").replace(/\/+$/, "");
  const f = opts.fetch ?? ((...a) => globalThis.fetch(...a));
  const ES = opts.EventSource === undefined ? globalThis.EventSource : opts.EventSource;
  const retries = opts.retries ?? 4;
  const sleep = opts.sleep ?? defaultSleep;
  const random = opts.random ?? Math.random;
  const roomPath = (room) => `${base}/v1/rooms/${encodeURIComponent(room)}`;
  /** The rooms whose last enter or status answer asked for the room beacon (Flashgate-Beacon). */
  const beaconRooms = new Set();
  const hint = (room) => (res) => {
    if (res.headers?.get?.("Flashgate-Beacon")) beaconRooms.add(room);
    else beaconRooms.delete(room);
  };

  /**
   * once sends one request; an error answer or no answer throws FlashgateError.
   * @param {string} method
   * @param {string} url
   * @param {string} [token]
   */
  async function once(method, url, token, body, onRes) {
    /** @type {Record<string, string>} */
    const headers = { Accept: "application/json" };
    if (token) headers.Authorization = `Bearer ${token}`;
    /** @type {RequestInit} */
    const init = { method, headers, credentials: "include", cache: "no-store" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await f(url, init);
    } catch (err) {
      throw new FlashgateError({ type: "about:blank", title: "No answer", status: 0, code: "network", detail: String(err) });
    }
    if (res.ok) {
      onRes?.(res);
      return res.status === 204 ? undefined : res.json();
    }
    let problem;
    try {
      problem = await res.json();
    } catch {
      problem = null;
    }
    if (!problem || typeof problem !== "object") problem = { type: "about:blank", title: res.statusText || "Error" };
    problem.status ??= res.status;
    problem.code ??= res.status === 503 ? "unavailable" : res.status === 429 ? "rate_limited" : "http_" + res.status;
    throw new FlashgateError(problem, retryAfterMs(res.headers.get("Retry-After")));
  }

  /** request is once with up to `retries` retries of 429, 503 and network failures. */
  async function request(method, url, token, body, onRes) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await once(method, url, token, body, onRes);
      } catch (err) {
        if (!(err instanceof FlashgateError) || !err.retryable || attempt >= retries) throw err;
        await sleep(jitter(err.retryAfterMs ?? backoff(attempt + 1), random));
      }
    }
  }

  /**
   * updates follows an entry until it leaves WAITING: over server-sent
   * events, or by polling (poll_after_ms, ±20 %) when EventSource is absent
   * or fails. onEntry gets every entry; retryable failures (429, 503, no
   * answer, an issuer restart) keep the last entry, are reported to onError
   * and retried with backoff (Retry-After when given). Resolves with the
   * first entry whose state is not WAITING; rejects with a FlashgateError
   * that retrying cannot fix (401, 403, 404 …) or the signal's reason.
   *
   * While the issuer asks for it (a status answer carries Flashgate-Beacon,
   * e.g. when the replica holds its most event streams), a public entry
   * polls the room beacon instead (BEACON_POLL_MS, ±20 %; a cacheable URL,
   * sent without credentials) and places itself from its arrival number
   * (beaconPlace): onEntry gets the entry with that place, total_waiting,
   * room_state and page_message from the beacon, position_estimated true.
   * It asks its status (one call) instead when the beacon places it at
   * most near_head from the front, cannot place it (admitted, left, a lane,
   * the pre-queue), shows a new room state, close reason or opening time,
   * is stale (past its exp) or fails: so the exact place near the head,
   * and every state change, come from the status answer as before.
   * @type {Client["updates"]}
   */
  async function updates(room, waitingToken, onEntry, { signal, onError, beacon: askBeacon } = {}) {
    let last = null;
    let failures = 0;
    const asked = askBeacon === true || beaconRooms.has(room);
    let streaming = typeof ES === "function" && !asked; // asked for the beacon: no stream to hold
    const url = `${roomPath(room)}/events?waiting_token=${encodeURIComponent(waitingToken)}`;
    /** @type {string|null} the beacon's URL while the issuer asks for it */
    let beaconUrl = asked ? `${roomPath(room)}/beacon` : null;
    /** @type {Beacon|null} */
    let lastBeacon = null;
    const heard = (res) => {
      hint(room)(res);
      const p = res.headers?.get?.("Flashgate-Beacon");
      beaconUrl = p ? `${roomPath(room)}/beacon` : null; // (base's path prefix kept: the header is the signal)
    };
    // fromBeacon returns the entry a beacon places, or null when the page must ask its status.
    const fromBeacon = async () => {
      if (!beaconUrl || !last || last.state !== "WAITING" || !(last.arrival > 0) || last.lane === "priority" || last.pre_queue) return null;
      let b = null;
      try {
        const res = await f(beaconUrl, { method: "GET", credentials: "omit" });
        if (res.ok) b = decodeBeacon(await res.text());
      } catch {}
      const old = lastBeacon;
      if (!b || b.exp * 1000 < Date.now()) return null;
      lastBeacon = b;
      if (beaconChanged(b, old, last)) return null;
      const p = beaconPlace(b, last.arrival);
      if (!p.ok || p.place <= b.near_head) return null;
      const e = { ...last, position: p.place, ahead: p.place - 1, total_waiting: b.total_waiting, position_estimated: true,
        room_state: b.state, page_message: b.page_message ?? "" };
      if (last.estimated_wait_ms > 0 && last.position > 0) e.estimated_wait_ms = Math.round((last.estimated_wait_ms * p.place) / last.position);
      return e;
    };
    const seen = (e) => {
      last = e;
      failures = 0;
      onEntry(e);
      return e.state !== "WAITING";
    };
    const failed = async (err) => {
      if (!(err instanceof FlashgateError) || !err.retryable) throw err;
      failures++;
      onError?.(err, last);
      await sleep(jitter(err.retryAfterMs ?? backoff(failures), random), signal);
    };
    for (;;) {
      signal?.throwIfAborted();
      if (streaming) {
        const r = await stream(url, seen, signal);
        if (r.final) return r.final;
        if (r.problem) {
          await failed(new FlashgateError(r.problem));
          continue;
        }
        // The stream broke: one poll tells why (and keeps the line moving);
        // a stream that never delivered an event is given up for polling,
        // and so is one a newer stream of this user replaced (another tab
        // over the server's per-user limit): reconnecting would replace that
        // one in turn.
        if (!r.delivered || r.replaced) streaming = false;
      }
      if (!streaming && beaconUrl) {
        const e = await fromBeacon();
        if (e) {
          seen(e);
          await sleep(jitter(BEACON_POLL_MS, random), signal);
          continue;
        }
      }
      try {
        const e = await once("GET", `${roomPath(room)}/status`, waitingToken, undefined, heard);
        if (seen(e)) return e;
        if (streaming) continue;
        // On the beacon, its next poll comes at BEACON_POLL_MS (sooner when the status says so).
        const next = e.poll_after_ms ?? DEFAULT_POLL_MS;
        await sleep(jitter(beaconUrl ? Math.min(next, BEACON_POLL_MS) : next, random), signal);
      } catch (err) {
        await failed(err);
      }
    }
  }

  /**
   * stream runs one EventSource connection until a final entry, a problem
   * or replaced event, an error or the signal.
   * @returns {Promise<{final?: Entry, problem?: Problem, delivered: boolean, replaced?: boolean}>}
   */
  function stream(url, seen, signal) {
    return new Promise((resolve, reject) => {
      let es;
      try {
        es = new ES(url, { withCredentials: true });
      } catch {
        return resolve({ delivered: false });
      }
      let delivered = false;
      const done = (v, abort) => {
        es.close();
        signal?.removeEventListener("abort", onAbort);
        abort ? reject(signal.reason) : resolve(v);
      };
      const onAbort = () => done(null, true);
      signal?.addEventListener("abort", onAbort, { once: true });
      es.addEventListener("status", (ev) => {
        let e;
        try {
          e = JSON.parse(ev.data);
        } catch {
          return;
        }
        delivered = true;
        if (seen(e)) done({ final: e, delivered });
      });
      es.addEventListener("problem", (ev) => {
        let p;
        try {
          p = JSON.parse(ev.data);
        } catch {
          p = { type: "about:blank", title: "Error", status: 503, code: "unavailable" };
        }
        done({ problem: p, delivered });
      });
      es.addEventListener("replaced", () => done({ delivered, replaced: true }));
      es.addEventListener("error", () => done({ delivered }));
    });
  }

  /**
   * leaveBeacon gives up a place in line without waiting for an answer, with
   * navigator.sendBeacon (which outlives the page). A beacon cannot set
   * headers, so the waiting token travels as the waiting_token query
   * parameter, and the beacon has no body. True when the browser queued it.
   * @type {Client["leaveBeacon"]}
   */
  function leaveBeacon(room, waitingToken) {
    const nav = globalThis.navigator;
    const send = opts.sendBeacon !== undefined ? opts.sendBeacon : nav?.sendBeacon ? (u) => nav.sendBeacon(u) : null;
    if (!send || !waitingToken) return false;
    try {
      return send(`${roomPath(room)}/leave?waiting_token=${encodeURIComponent(waitingToken)}`) === true;
    } catch {
      return false;
    }
  }

  /**
   * leaveOnPagehide sends leaveBeacon when the page is hidden for good
   * (pagehide, not into the back/forward cache) while current() is WAITING:
   * a courtesy that frees the place at once. It is never what frees an
   * admission — the room's arrival window does that. Other pages of this
   * room open in the same browser share the place (one visitor, one place),
   * so the beacon is sent only by the last of them (BroadcastChannel).
   * Returns a function that stops it.
   * @type {Client["leaveOnPagehide"]}
   */
  function leaveOnPagehide(room, current) {
    const target = opts.window ?? globalThis;
    const BC = opts.BroadcastChannel === undefined ? globalThis.BroadcastChannel : opts.BroadcastChannel;
    const id = globalThis.crypto?.randomUUID?.() ?? Math.random().toString(36).slice(2) + Date.now().toString(36);
    const peers = new Set();
    let ch = null;
    if (typeof BC === "function") {
      try {
        ch = new BC(`flashgate:${room}`);
        ch.onmessage = ({ data }) => {
          if (!data || data.id === id) return;
          if (data.t === "bye") peers.delete(data.id);
          else peers.add(data.id);
          if (data.t === "hello") ch.postMessage({ t: "here", id });
        };
        ch.postMessage({ t: "hello", id });
      } catch {
        ch = null;
      }
    }
    const onHide = (ev) => {
      if (ev?.persisted) return; // in the back/forward cache: the page may come back
      ch?.postMessage({ t: "bye", id });
      const e = current();
      if (peers.size === 0 && e?.state === "WAITING") leaveBeacon(room, e.waiting_token);
    };
    target.addEventListener("pagehide", onHide);
    return () => {
      target.removeEventListener("pagehide", onHide);
      ch?.close();
    };
  }

  const solve = opts.solvePoW ?? solvePoW;

  /**
   * enter posts the enter; a pow_required answer (visitor mode with
   * FLASHGATE_ENTER_POW) is solved and the enter sent again with the
   * solution, at most twice (a challenge that expired while it was solved
   * is answered with a fresh one).
   * @type {Client["enter"]}
   */
  async function enter(room, { invite, onPoW, signal } = {}) {
    const url = `${roomPath(room)}/enter`;
    let body = invite === undefined ? undefined : { invite };
    for (let tries = 0; ; tries++) {
      try {
        return await request("POST", url, undefined, body, hint(room));
      } catch (err) {
        const ch = err instanceof FlashgateError && err.code === "pow_required" ? err.problem.challenge : undefined;
        if (!ch || tries >= 2) throw err;
        onPoW?.({ state: "solving", challenge: ch });
        const pow = await solve(ch, { signal });
        let took = 0, number = -1;
        try {
          ({ took, number } = JSON.parse(atob(pow)));
        } catch {}
        onPoW?.({ state: "solved", took, number });
        body = { ...(invite === undefined ? {} : { invite }), pow };
      }
    }
  }

  return {
    enter,
    status: (room, waitingToken) => request("GET", `${roomPath(room)}/status`, waitingToken, undefined, hint(room)),
    updates,
    exchange: (room, waitingToken) => request("POST", `${roomPath(room)}/exchange`, waitingToken),
    leave: (room, waitingToken) => request("POST", `${roomPath(room)}/leave`, waitingToken),
    leaveBeacon,
    leaveOnPagehide,
  };
}
