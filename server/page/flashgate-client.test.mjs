// Unit tests of flashgate-client.js: node --test server/page/*.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { BEACON_POLL_MS, beaconPlace, createClient, decodeBeacon, FlashgateError, jitter, retryAfterMs, solvePoW } from "./flashgate-client.js";

/** fakeFetch answers from a queue of [status, body, headers] and records the requests. */
function fakeFetch(answers) {
  const calls = [];
  const fn = async (url, init) => {
    calls.push({ url, ...init });
    const a = answers.shift();
    if (!a) throw new Error("unexpected request " + url);
    if (a instanceof Error) throw a;
    const [status, body, headers = {}] = a;
    return new Response(status === 204 ? null : JSON.stringify(body), {
      status,
      headers: { "content-type": status >= 400 ? "application/problem+json" : "application/json", ...headers },
    });
  };
  fn.calls = calls;
  return fn;
}

const waiting = (pos, poll = 2000) => ({ room: "r", state: "WAITING", waiting_token: "fgw2_t", position: pos, ahead: pos - 1, poll_after_ms: poll });
const active = { room: "r", state: "ACTIVE", waiting_token: "fgw2_t" };
const problem = (status, code) => ({ type: "https://flashgate.dev/problems/" + code.replaceAll("_", "-"), title: code, status, code });

function setup(answers, extra = {}) {
  const fetch = fakeFetch(answers);
  const sleeps = [];
  const client = createClient({
    base: "https://q.example/",
    fetch,
    EventSource: null,
    sleep: async (ms) => void sleeps.push(ms),
    random: () => 0.5, // no jitter
    ...extra,
  });
  return { client, fetch, sleeps };
}

test("jitter stays within ±20 %", () => {
  assert.equal(jitter(1000, () => 0), 800);
  assert.equal(jitter(1000, () => 0.5), 1000);
  assert.equal(jitter(1000, () => 0.999999), 1200);
  assert.equal(retryAfterMs("3"), 3000);
  assert.equal(retryAfterMs(null), undefined);
});

test("enter posts with credentials and returns the entry", async () => {
  const { client, fetch } = setup([[200, waiting(5)]]);
  const e = await client.enter("sku 1");
  assert.equal(e.position, 5);
  assert.equal(fetch.calls[0].url, "https://q.example/v1/rooms/sku%201/enter");
  assert.equal(fetch.calls[0].method, "POST");
  assert.equal(fetch.calls[0].credentials, "include");
  assert.equal(fetch.calls[0].headers.Authorization, undefined);
});

test("enter with an invite posts it as the JSON body", async () => {
  const { client, fetch } = setup([[200, { ...waiting(1), lane: "priority" }], [200, waiting(2)]]);
  const e = await client.enter("r", { invite: "h.p.s" });
  assert.equal(e.lane, "priority");
  assert.equal(fetch.calls[0].headers["Content-Type"], "application/json");
  assert.deepEqual(JSON.parse(fetch.calls[0].body), { invite: "h.p.s" });
  await client.enter("r");
  assert.equal(fetch.calls[1].body, undefined, "no invite: no body");
});

test("exchange and leave send the waiting token as a Bearer token", async () => {
  const adm = { admission_token: "a.b.c", admission_id: "x", admission: 1, expires_at_ms: 2000, issued_at_ms: 1000 };
  const { client, fetch } = setup([[200, adm], [204]]);
  assert.deepEqual(await client.exchange("r", "fgw2_t"), adm);
  assert.equal(await client.leave("r", "fgw2_t"), undefined);
  for (const [i, p] of ["exchange", "leave"].entries()) {
    const c = fetch.calls[i];
    assert.equal(c.url, `https://q.example/v1/rooms/r/${p}`);
    assert.equal(c.method, "POST");
    assert.equal(c.credentials, "include");
    assert.equal(c.headers.Authorization, "Bearer fgw2_t");
  }
});

test("errors are FlashgateErrors carrying the problem document", async () => {
  const { client } = setup([[403, problem(403, "room_closed")]]);
  await assert.rejects(client.enter("r"), (err) => {
    assert.ok(err instanceof FlashgateError);
    assert.equal(err.code, "room_closed");
    assert.equal(err.status, 403);
    assert.equal(err.problem.title, "room_closed");
    return true;
  });
});

test("429 is retried after Retry-After", async () => {
  const { client, fetch, sleeps } = setup([[429, problem(429, "rate_limited"), { "retry-after": "2" }], [200, waiting(3)]]);
  assert.equal((await client.enter("r")).position, 3);
  assert.equal(fetch.calls.length, 2);
  assert.deepEqual(sleeps, [2000]);
});

test("503 without Retry-After backs off exponentially, then gives up", async () => {
  const u = [503, problem(503, "unavailable")];
  const { client, sleeps } = setup([u, u, u, u, u], { retries: 4 });
  await assert.rejects(client.status("r", "t"), (err) => err.code === "unavailable");
  assert.deepEqual(sleeps, [1000, 2000, 4000, 8000]);
});

test("polling honours poll_after_ms", async () => {
  const { client, fetch, sleeps } = setup([[200, waiting(3, 1500)], [200, waiting(2, 2500)], [200, active]]);
  const seen = [];
  const last = await client.updates("r", "fgw2_t", (e) => seen.push(e.state + (e.position ?? "")));
  assert.equal(last.state, "ACTIVE");
  assert.deepEqual(seen, ["WAITING3", "WAITING2", "ACTIVE"]);
  assert.deepEqual(sleeps, [1500, 2500]);
  assert.ok(fetch.calls.every((c) => c.method === "GET" && c.url === "https://q.example/v1/rooms/r/status"));
});

test("polling jitter is ±20 % of poll_after_ms", async () => {
  for (const [r, want] of [[0, 1600], [0.999999, 2400]]) {
    const { client, sleeps } = setup([[200, waiting(3)], [200, active]], { random: () => r });
    await client.updates("r", "t", () => {});
    assert.deepEqual(sleeps, [want]);
  }
});

test("503 + Retry-After while polling backs off and keeps the entry", async () => {
  const { client, sleeps } = setup([
    [200, waiting(4, 1000)],
    [503, problem(503, "unavailable"), { "retry-after": "3" }],
    [503, problem(503, "unavailable"), { "retry-after": "5" }],
    [200, waiting(2, 1000)],
    [200, active],
  ]);
  const seen = [];
  const errs = [];
  await client.updates("r", "t", (e) => seen.push(e.position ?? e.state), {
    onError: (err, last) => errs.push([err.code, last.position]),
  });
  assert.deepEqual(seen, [4, 2, "ACTIVE"]);
  assert.deepEqual(errs, [["unavailable", 4], ["unavailable", 4]]);
  assert.deepEqual(sleeps, [1000, 3000, 5000, 1000]);
});

test("updates survive an issuer restart (no answer) with backoff", async () => {
  const { client, sleeps } = setup([[200, waiting(4, 1000)], new TypeError("fetch failed"), new TypeError("fetch failed"), [200, active]]);
  const last = await client.updates("r", "t", () => {});
  assert.equal(last.state, "ACTIVE");
  assert.deepEqual(sleeps, [1000, 1000, 2000]);
});

test("updates reject on a problem retrying cannot fix", async () => {
  const { client } = setup([[401, problem(401, "invalid_waiting_token")]]);
  await assert.rejects(client.updates("r", "t", () => {}), (err) => err.code === "invalid_waiting_token");
});

/** FakeEventSource records instances; tests drive them. */
class FakeEventSource {
  static all = [];
  constructor(url, init) {
    this.url = url;
    this.init = init;
    this.listeners = {};
    this.closed = false;
    FakeEventSource.all.push(this);
  }
  addEventListener(type, fn) {
    (this.listeners[type] ??= []).push(fn);
  }
  close() {
    this.closed = true;
  }
  emit(type, data) {
    for (const fn of this.listeners[type] ?? []) fn({ data: data === undefined ? undefined : JSON.stringify(data) });
  }
}
const tick = () => new Promise((r) => setImmediate(r));

test("updates use EventSource and close it on a final state", async () => {
  FakeEventSource.all = [];
  const { client, fetch } = setup([], { EventSource: FakeEventSource });
  const seen = [];
  const p = client.updates("r", "fgw2_t", (e) => seen.push(e.state));
  await tick();
  const es = FakeEventSource.all[0];
  assert.equal(es.url, "https://q.example/v1/rooms/r/events?waiting_token=fgw2_t");
  assert.deepEqual(es.init, { withCredentials: true });
  es.emit("status", waiting(2));
  es.emit("status", active);
  assert.equal((await p).state, "ACTIVE");
  assert.ok(es.closed);
  assert.deepEqual(seen, ["WAITING", "ACTIVE"]);
  assert.equal(fetch.calls.length, 0);
});

test("updates treat CLOSED as final: the stream closes, polling stops", async () => {
  FakeEventSource.all = [];
  const closed = { room: "r", state: "CLOSED", waiting_token: "fgw2_t", reason: "sold_out", ended_at_ms: 1 };
  const { client } = setup([], { EventSource: FakeEventSource });
  const p = client.updates("r", "fgw2_t", () => {});
  await tick();
  const es = FakeEventSource.all[0];
  es.emit("status", waiting(9));
  es.emit("status", closed);
  const e = await p;
  assert.equal(e.state, "CLOSED");
  assert.equal(e.reason, "sold_out");
  assert.ok(es.closed);
  const polled = setup([[200, waiting(4, 1000)], [200, closed]]);
  assert.equal((await polled.client.updates("r", "fgw2_t", () => {})).state, "CLOSED");
  assert.equal(polled.fetch.calls.length, 2, "no poll after CLOSED");
});

test("a failing EventSource falls back to polling", async () => {
  FakeEventSource.all = [];
  const { client, sleeps } = setup([[200, waiting(3, 1200)], [200, active]], { EventSource: FakeEventSource });
  const p = client.updates("r", "t", () => {});
  await tick();
  FakeEventSource.all[0].emit("error");
  assert.equal((await p).state, "ACTIVE");
  assert.equal(FakeEventSource.all.length, 1, "no second EventSource once it never worked");
  assert.deepEqual(sleeps, [1200]);
});

test("a replaced stream (another tab over the per-user limit) falls back to polling", async () => {
  FakeEventSource.all = [];
  const { client, sleeps } = setup([[200, waiting(2, 1500)], [200, active]], { EventSource: FakeEventSource });
  const p = client.updates("r", "t", () => {});
  await tick();
  const es = FakeEventSource.all[0];
  es.emit("status", waiting(3));
  es.emit("replaced", { reason: "replaced", max_streams: 2, detail: "x" });
  assert.equal((await p).state, "ACTIVE");
  assert.ok(es.closed);
  assert.equal(FakeEventSource.all.length, 1, "no new stream that would replace the other tab's");
  assert.deepEqual(sleeps, [1500]);
});

test("a problem event (503) keeps the entry and reconnects with backoff", async () => {
  FakeEventSource.all = [];
  const { client, sleeps } = setup([], { EventSource: FakeEventSource });
  const errs = [];
  const p = client.updates("r", "t", () => {}, { onError: (err, last) => errs.push([err.code, last.position]) });
  await tick();
  FakeEventSource.all[0].emit("status", waiting(5));
  FakeEventSource.all[0].emit("problem", problem(503, "unavailable"));
  await tick();
  await tick();
  assert.equal(FakeEventSource.all.length, 2);
  FakeEventSource.all[1].emit("status", active);
  assert.equal((await p).state, "ACTIVE");
  assert.deepEqual(errs, [["unavailable", 5]]);
  assert.deepEqual(sleeps, [1000]);
});

test("abort stops updates", async () => {
  const ac = new AbortController();
  const { client } = setup([[200, waiting(3)]], {
    sleep: (ms, signal) =>
      new Promise((_, rej) => (signal.aborted ? rej(signal.reason) : signal.addEventListener("abort", () => rej(signal.reason)))),
  });
  const p = client.updates("r", "t", () => ac.abort(), { signal: ac.signal });
  await assert.rejects(p, (err) => err.name === "AbortError");
});

/** fakeChannels returns a BroadcastChannel constructor whose channels deliver to each other at once. */
function fakeChannels() {
  const all = new Set();
  return class {
    constructor(name) {
      this.name = name;
      this.onmessage = null;
      all.add(this);
    }
    postMessage(data) {
      for (const c of [...all]) if (c !== this && c.name === this.name) c.onmessage?.({ data: structuredClone(data) });
    }
    close() {
      all.delete(this);
    }
  };
}

function pagehide(target, persisted = false) {
  const ev = new Event("pagehide");
  ev.persisted = persisted;
  target.dispatchEvent(ev);
}

test("leaveBeacon sends the waiting token in the query (a beacon cannot set headers) with no body", () => {
  const sent = [];
  const { client } = setup([], { sendBeacon: (...a) => (sent.push(a), true) });
  assert.equal(client.leaveBeacon("sku 1", "fgw2_a/b"), true);
  assert.deepEqual(sent, [["https://q.example/v1/rooms/sku%201/leave?waiting_token=fgw2_a%2Fb"]]);
  assert.equal(setup([], { sendBeacon: null }).client.leaveBeacon("r", "fgw2_t"), false, "no sendBeacon: nothing sent");
  assert.equal(setup([], { sendBeacon: () => { throw new Error("quota"); } }).client.leaveBeacon("r", "t"), false);
});

test("leaveOnPagehide leaves by beacon only while WAITING, not into the back/forward cache", () => {
  const sent = [];
  const win = new EventTarget();
  const { client } = setup([], { sendBeacon: (u) => (sent.push(u), true), window: win, BroadcastChannel: null });
  let entry = waiting(3);
  const stop = client.leaveOnPagehide("r", () => entry);
  pagehide(win, true);
  assert.equal(sent.length, 0, "persisted: the page may come back");
  pagehide(win);
  assert.deepEqual(sent, ["https://q.example/v1/rooms/r/leave?waiting_token=fgw2_t"]);
  entry = active;
  pagehide(win);
  assert.equal(sent.length, 1, "ACTIVE: no leave (the arrival window frees an unclaimed admission)");
  entry = waiting(1);
  stop();
  pagehide(win);
  assert.equal(sent.length, 1, "stopped");
});

test("leaveOnPagehide: only the last page of the room sharing the place leaves", () => {
  const sent = [];
  const BroadcastChannel = fakeChannels();
  const tab = () => {
    const win = new EventTarget();
    const { client } = setup([], { sendBeacon: (u) => (sent.push(u), true), window: win, BroadcastChannel });
    return { win, stop: client.leaveOnPagehide("r", () => waiting(2)) };
  };
  const a = tab();
  const b = tab();
  const other = (() => {
    const win = new EventTarget();
    setup([], { sendBeacon: () => true, window: win, BroadcastChannel }).client.leaveOnPagehide("other-room", () => waiting(1));
    return win;
  })();
  assert.ok(other);
  pagehide(b.win);
  assert.equal(sent.length, 0, "another tab still shows the place");
  pagehide(a.win);
  assert.equal(sent.length, 1, "the last tab leaves");
  a.stop();
  b.stop();
});

// The ALTCHA vector of server/pow_test.go (computed with Python's hashlib):
// hex(SHA-256(salt + "31337")).
const VEC = {
  algorithm: "SHA-256",
  challenge: "eaad41b71a8aa7776862be7e28226fba16dab7ada2f5a2298a99638d93a95223",
  maxnumber: 40000,
  salt: "46a8ba5ee6b85c3d5e3b1b2a?expires=1893456000&v=abc&",
  signature: "583933859abca5a610ed42ff74e29792809b08c848854b630f3b0478b5ee3ffc",
};

/** challengeFor is a challenge whose number is n (signature not checked here). */
function challengeFor(n, maxnumber = 64) {
  const salt = "0123456789abcdef01234567?expires=1893456000&v=x&";
  const challenge = createHash("sha256").update(salt + n).digest("hex");
  return { algorithm: "SHA-256", challenge, maxnumber, salt, signature: "ab".repeat(32) };
}

test("solvePoW finds the number of an ALTCHA challenge and answers the widget's payload", async () => {
  const payload = await solvePoW(VEC);
  const p = JSON.parse(atob(payload));
  assert.equal(p.number, 31337);
  assert.deepEqual(
    { algorithm: p.algorithm, challenge: p.challenge, salt: p.salt, signature: p.signature },
    { algorithm: VEC.algorithm, challenge: VEC.challenge, salt: VEC.salt, signature: VEC.signature },
  );
  assert.equal(typeof p.took, "number");
  assert.equal(JSON.parse(atob(await solvePoW(challengeFor(0, 0)))).number, 0, "n = 0 = maxnumber");
});

test("solvePoW refuses what it cannot solve", async () => {
  await assert.rejects(solvePoW({ ...VEC, maxnumber: 30000 }), (e) => e instanceof FlashgateError && e.code === "pow_unsolvable");
  await assert.rejects(solvePoW({ ...VEC, algorithm: "SHA-1" }), (e) => e.code === "pow_unsolvable");
  await assert.rejects(solvePoW({ ...VEC, challenge: "zz" }), (e) => e.code === "pow_unsolvable");
  const ac = new AbortController();
  ac.abort(new Error("stop"));
  await assert.rejects(solvePoW(VEC, { signal: ac.signal }), /stop/);
});

test("enter solves a pow_required answer and sends the enter again with the solution", async () => {
  const ch = challengeFor(41);
  const { client, fetch } = setup([[428, { ...problem(428, "pow_required"), challenge: ch }], [200, waiting(3)]]);
  const events = [];
  const e = await client.enter("r", { invite: "h.p.s", onPoW: (ev) => events.push(ev.state) });
  assert.equal(e.position, 3);
  assert.equal(fetch.calls.length, 2);
  assert.deepEqual(JSON.parse(fetch.calls[0].body), { invite: "h.p.s" });
  const body = JSON.parse(fetch.calls[1].body);
  assert.equal(body.invite, "h.p.s");
  const sol = JSON.parse(atob(body.pow));
  assert.equal(sol.number, 41);
  assert.equal(sol.challenge, ch.challenge);
  assert.equal(sol.signature, ch.signature);
  assert.deepEqual(events, ["solving", "solved"]);
});

test("enter gives up after two solutions refused, and throws other answers as before", async () => {
  const refused = () => [428, { ...problem(428, "pow_required"), challenge: challengeFor(1) }];
  const { client, fetch } = setup([refused(), refused(), refused()]);
  await assert.rejects(client.enter("r"), (e) => e instanceof FlashgateError && e.code === "pow_required" && e.status === 428);
  assert.equal(fetch.calls.length, 3);
  // A custom solver (e.g. ALTCHA's) is used when given.
  const { client: c2, fetch: f2 } = setup([refused(), [200, waiting(1)]], { solvePoW: async () => "custom" });
  await c2.enter("r");
  assert.deepEqual(JSON.parse(f2.calls[1].body), { pow: "custom" });
});

// The room beacon (docs/browser.md#the-room-beacon).

const b64u = (s) => Buffer.from(s).toString("base64url");
const jws = (payload) => `${b64u('{"alg":"EdDSA","kid":"k","typ":"flashgate-beacon+jwt"}')}.${b64u(JSON.stringify(payload))}.${"A".repeat(86)}`;
const beacon = (extra = {}) => ({
  room: "r", iat: Math.floor(Date.now() / 1000), exp: Math.floor(Date.now() / 1000) + 5, state: "open",
  total_waiting: 1000, priority: 0, head: 11, tail: 1010, exact_through: 0, drawn_ahead: 0, near_head: 50,
  buckets: [[11, 1], [12, 2], [20, 10], [1010, 1000]], ...extra,
});

test("beaconPlace places as verifier.Beacon.Place does, within its bound", () => {
  const b = { priority: 2, drawn_ahead: 0, exact_through: 0, head: 11, tail: 110, buckets: [[11, 1], [12, 2], [20, 10], [50, 30], [110, 90]] };
  assert.deepEqual(beaconPlace(b, 10), { ok: false, place: 0, maxErr: -1 });
  assert.deepEqual(beaconPlace(b, 11), { ok: true, place: 3, maxErr: 0 });
  assert.deepEqual(beaconPlace(b, 12), { ok: true, place: 4, maxErr: 0 });
  assert.deepEqual(beaconPlace(b, 20), { ok: true, place: 12, maxErr: 0 });
  assert.deepEqual(beaconPlace(b, 50), { ok: true, place: 32, maxErr: 10 });
  assert.deepEqual(beaconPlace(b, 35), { ok: true, place: 22, maxErr: 10 });
  assert.deepEqual(beaconPlace(b, 111), { ok: false, place: 93, maxErr: -1 });
  assert.equal(beaconPlace({ ...b, exact_through: 40 }, 35).ok, false);
});

test("decodeBeacon reads the payload (UTF-8) and refuses what is not a beacon", () => {
  assert.equal(decodeBeacon(jws(beacon({ page_message: "Bientôt ✓" }))).page_message, "Bientôt ✓");
  assert.equal(decodeBeacon("a.b"), null);
  assert.equal(decodeBeacon(`x.${b64u("{}")}.y`), null);
  assert.equal(decodeBeacon(`x.${b64u("not json")}.y`), null);
});

/** beaconSetup: a fetch whose status answers come from a queue and whose beacon answers from beacons(). */
function beaconSetup(statuses, beacons) {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url, ...init });
    if (url.endsWith("/beacon")) {
      const b = beacons();
      return new Response(b === null ? "{}" : jws(b), { status: b === null ? 503 : 200, headers: { "content-type": "application/jwt" } });
    }
    const a = statuses.shift();
    if (!a) throw new Error("unexpected request " + url);
    const [status, body, headers = {}] = a;
    return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
  };
  const sleeps = [];
  const client = createClient({ base: "https://q.example/", fetch, EventSource: null, sleep: async (ms) => void sleeps.push(ms), random: () => 0.5 });
  return { client, calls, sleeps };
}

const hinted = { "Flashgate-Beacon": "/v1/rooms/r/beacon" };
const far = (extra = {}) => ({ ...waiting(900), arrival: 910, total_waiting: 1000, estimated_wait_ms: 900_000, room_state: "open", ...extra });

test("asked for the beacon, a far page polls it, places itself estimated, and asks its status near the head", async () => {
  let head = 11;
  const seq = [];
  const { client, calls, sleeps } = beaconSetup(
    [[200, far(), hinted], [200, { ...far(), position: 40, ahead: 39 }, hinted], [200, active]],
    () => {
      head += 400; // the line moves 400 a poll
      return beacon({ head, buckets: [[head, 1], [1010, 1010 - head + 1]] });
    },
  );
  const final = await client.updates("r", "fgw2_t", (e) => seq.push(e));
  assert.equal(final.state, "ACTIVE");
  const urls = calls.map((c) => c.url.replace("https://q.example/v1/rooms/r/", ""));
  // status (the hint) → beacon (head 411: place 500) → beacon (head 811: place 100) → beacon (head 1211 > 910: ahead of the head) → status → …
  assert.deepEqual(urls, ["status", "beacon", "beacon", "beacon", "status", "beacon", "status"]);
  assert.deepEqual(seq.map((e) => [e.state, e.position, !!e.position_estimated]),
    [["WAITING", 900, false], ["WAITING", 500, true], ["WAITING", 100, true], ["WAITING", 40, false], ["ACTIVE", undefined, false]]);
  assert.equal(seq[1].estimated_wait_ms, 500_000, "the estimate scales with the place");
  assert.equal(calls[1].credentials, "omit", "the beacon is one public URL: no cookie");
  assert.equal(calls[1].headers, undefined, "nor a token");
  assert.equal(sleeps[1], BEACON_POLL_MS);
});

test("a beacon showing a new room state, a stale or failed one, or a priority entry sends the page to its status", async () => {
  // A pause the beacon shows: the status at once.
  let n = 0;
  let { client, calls } = beaconSetup([[200, far(), hinted], [200, far({ room_state: "paused" }), hinted], [200, active]],
    () => (++n === 1 ? beacon({ state: "paused" }) : beacon({ state: "paused", head: 2000, buckets: [[2000, 1]] })));
  await client.updates("r", "fgw2_t", () => {});
  assert.deepEqual(calls.map((c) => c.url.split("/").pop()), ["status", "beacon", "status", "beacon", "status"]);

  // Stale (past exp) or failing: the status.
  for (const b of [beacon({ exp: Math.floor(Date.now() / 1000) - 10 }), null]) {
    ({ client, calls } = beaconSetup([[200, far(), hinted], [200, active]], () => b));
    await client.updates("r", "fgw2_t", () => {});
    assert.deepEqual(calls.map((c) => c.url.split("/").pop()), ["status", "beacon", "status"]);
  }

  // A priority entry (its arrival number says nothing of its place): the status only.
  ({ client, calls } = beaconSetup([[200, far({ lane: "priority" }), hinted], [200, active]], () => beacon()));
  await client.updates("r", "fgw2_t", () => {});
  assert.deepEqual(calls.map((c) => c.url.split("/").pop()), ["status", "status"]);

  // Without the hint: no beacon.
  ({ client, calls } = beaconSetup([[200, far()], [200, active]], () => beacon()));
  await client.updates("r", "fgw2_t", () => {});
  assert.deepEqual(calls.map((c) => c.url.split("/").pop()), ["status", "status"]);
});

test("asked for the beacon by enter (or updates' beacon option), updates holds no stream and polls the beacon", async () => {
  for (const viaOption of [false, true]) {
    const calls = [];
    let streams = 0;
    const fetch = async (url, init) => {
      calls.push(url.split("/").pop());
      if (url.endsWith("/beacon")) return new Response(jws(beacon({ head: 2000, buckets: [[2000, 1]] })), { status: 200 });
      const body = url.endsWith("/enter") ? far() : calls.filter((c) => c === "status").length === 1 ? far({ poll_after_ms: 30000 }) : active;
      return new Response(JSON.stringify(body), { status: 200, headers: { "content-type": "application/json", ...hinted } });
    };
    class ES {
      constructor() {
        streams++;
      }
      addEventListener() {}
      close() {}
    }
    const sleeps = [];
    const client = createClient({ base: "https://q.example", fetch, EventSource: ES, sleep: async (ms) => void sleeps.push(ms), random: () => 0.5 });
    if (!viaOption) await client.enter("r");
    const final = await client.updates("r", "fgw2_t", () => {}, { beacon: viaOption });
    assert.equal(final.state, "ACTIVE");
    assert.equal(streams, 0, "no event stream");
    // (enter →) status (the arrival number) → beacon (the head passed it: ask) → status: ACTIVE
    assert.deepEqual(calls, [...(viaOption ? [] : ["enter"]), "status", "beacon", "status"]);
    assert.equal(sleeps[0], BEACON_POLL_MS, "on the beacon, the next poll is the beacon's, not poll_after (30 s)");
  }
});
