// wait.js drives the waiting page (wait.html): live updates over the
// browser client, the countdown, and the continuation when admitted. Its
// words come from the page's message catalog (<script type="application/json"
// id="fg-text">, the same catalog the server rendered the page with:
// docs/browser.md#languages); it fills only the page's data slots and never
// the operator's text.
import { createClient } from "/flashgate-client.js";

const root = document.getElementById("fg");
const $ = (id) => document.getElementById(id);
const d = root.dataset;
// The shared estimate page is for pages without script: with it, the
// buyer's own page follows the line itself.
if (d.estimateOf) location.replace(d.estimateOf);
const room = d.room;
let token = d.token;
const client = createClient({ base: "" });

// The catalog: i18next JSON v4 (flat keys, {{name}} interpolation, plural
// keys key_one, key_other … by the CLDR rules of Intl.PluralRules).
let TEXT = {};
try {
  TEXT = JSON.parse($("fg-text").textContent);
} catch {}
const lang = document.documentElement.lang || "en";
const plurals = new Intl.PluralRules(lang);
const numbers = new Intl.NumberFormat(lang);
function t(key, vars = {}) {
  const k = "count" in vars ? `${key}_${plurals.select(vars.count)}` : key;
  const s = TEXT[k] ?? TEXT[`${key}_other`] ?? key;
  return s.replace(/\{\{\s*(\w+)\s*\}\}/g, (m, name) => {
    const v = vars[name];
    return v == null ? m : typeof v === "number" ? numbers.format(v) : String(v);
  });
}

// The entry last shown. The page does not leave on pagehide
// (client.leaveOnPagehide): pagehide cannot tell closing the tab from
// reloading it, and a reload must keep the place; an admission nobody claims
// ends with the room's arrival window instead (docs/browser.md#the-waiting-room-page).
let current = token && ["waiting", "paused", "opens", "reconnecting"].includes(d.state) ? { state: "WAITING", waiting_token: token } : null;

// The page's data-state of each set of words (the catalog's state.{words}.*).
const STATE_OF = { continuing: "active", continued: "active", unclaimed: "ended", soldout: "closed", saleended: "closed", priority: "waiting", banned: "ended" };
let shownWords = null;

// show puts a state's words on the page; a change of words is announced in
// the live region (screen readers hear the news, not only the place).
function show(words, message) {
  const h = t(`state.${words}.heading`);
  const m = message ?? t(`state.${words}.message`);
  root.dataset.state = STATE_OF[words] ?? words;
  $("heading").textContent = h;
  $("message").textContent = m;
  // The room's name only once the server or an entry showed the room exists
  // (data-name): never the path's text of an unknown room.
  const name = d.title || d.name;
  document.title = name ? `${h} · ${name}` : h;
  if (words !== shownWords && shownWords !== null) announce(`${h}. ${m}`);
  shownWords = words;
}

function announce(text) {
  $("live").textContent = text;
}

function waitWords(ms) {
  if (ms == null || ms < 0) return t("eta.unknown");
  if (ms < 60000) return t("eta.soon");
  if (ms < 90 * 60000) return t("eta.minutes", { count: Math.round(ms / 60000) });
  return t("eta.hours", { count: Math.round(ms / 3600000) });
}

// The progress bar runs from the position at entry (remembered per tab) to the head.
const startKey = `flashgate:${room}:start`;
let lastAnnounced = null;

function place(e, quiet) {
  // An estimated place (the room beacon's, or the issuer's snapshot far back in line) reads "≈ n".
  $("position").textContent = (e.position_estimated ? "≈ " : "") + numbers.format(e.position);
  $("ahead").textContent = numbers.format(e.ahead);
  if ("estimated_wait_ms" in e) $("eta").textContent = waitWords(e.estimated_wait_ms);
  let start = 0;
  try {
    start = Number(sessionStorage.getItem(startKey));
    if (!start || start < e.position) sessionStorage.setItem(startKey, String((start = e.position)));
  } catch {
    start ||= e.position;
  }
  const bar = $("progress");
  bar.hidden = false;
  bar.max = Math.max(1, start - 1);
  bar.value = start - e.position;
  if (e.position !== lastAnnounced) {
    lastAnnounced = e.position;
    if (!quiet) announce(e.ahead === 0 ? t("live.next") : t("live.position", { position: e.position, count: e.ahead }));
  }
}

// unplaced shows an entry of the pre-queue: no place yet (pre_queue).
function unplaced() {
  $("position").textContent = t("place.drawn");
  $("ahead").textContent = "–";
  $("eta").textContent = t("eta.unknown");
  $("progress").hidden = true;
}

// The opening time in the buyer's own time zone, and a countdown to it.
let countdownTimer = 0;
const duration = (s) => {
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  if (Intl.DurationFormat) return new Intl.DurationFormat(lang, { style: "short" }).format(h ? { hours: h, minutes: m, seconds: r } : { minutes: m, seconds: r });
  const unit = (n, u) => new Intl.NumberFormat(lang, { style: "unit", unit: u, unitDisplay: "short" }).format(n);
  return [h && unit(h, "hour"), unit(m, "minute"), unit(r, "second")].filter(Boolean).join(" ");
};
function countdown() {
  const at = Number(d.opensAt);
  clearInterval(countdownTimer);
  if (!at) return false;
  const when = new Intl.DateTimeFormat(lang, { weekday: "short", month: "short", day: "numeric", hour: "numeric", minute: "2-digit", timeZoneName: "short" }).format(new Date(at));
  $("opens-at").textContent = t("opens.at", { time: when });
  $("countdown-line").hidden = false;
  const tick = () => {
    const s = Math.max(0, Math.round((at - Date.now()) / 1000));
    $("countdown").textContent = t("opens.in", { duration: duration(s) });
    if (s === 0) clearInterval(countdownTimer);
  };
  tick();
  countdownTimer = setInterval(tick, 1000);
  return true;
}

// The operator's message (page_message) when an entry carries one: text
// and Markdown links [text](https://…) only, built as DOM nodes (never as
// HTML), as the server renders it.
function roomMessage(msg) {
  const el = $("room-message");
  el.replaceChildren();
  el.hidden = !msg;
  if (!msg) return;
  msg.split("\n").forEach((line, i) => {
    if (i) el.append(document.createElement("br"));
    const re = /\[([^\]\n]{1,200})\]\(((?:https?:\/\/|mailto:)[^\s()<>"]{1,400})\)/g;
    let last = 0;
    for (const m of line.matchAll(re)) {
      el.append(line.slice(last, m.index));
      const a = document.createElement("a");
      a.href = m[2];
      a.rel = "noopener";
      a.textContent = m[1];
      el.append(a);
      last = m.index + m[0].length;
    }
    el.append(line.slice(last));
  });
  announce(el.textContent);
}

function render(e) {
  // When the first entry reached the page (ms since navigation start: docs/performance.md).
  d.firstEntryMs ||= String(Math.round(performance.now()));
  if (e.waiting_token) token = e.waiting_token;
  d.name ||= room; // an entry: the room exists
  current = e;
  if (typeof e.page_message === "string" && e.page_message !== d.message) {
    d.message = e.page_message;
    roomMessage(e.page_message);
  }
  if (e.state === "WAITING") {
    // The entry carries the opening time while it is ahead: the countdown
    // follows it (an operator may move it).
    if (e.opens_at_ms) d.opensAt = String(e.opens_at_ms);
    if (e.room_state === "closed") return show("closed");
    const message = e.pre_queue ? t("state.prequeue.message") : undefined;
    const before = shownWords;
    if (e.room_state === "paused") show(Number(d.opensAt) > Date.now() && countdown() ? "opens" : "paused", message);
    else show(e.lane === "priority" ? "priority" : "waiting", message);
    if (e.pre_queue) unplaced();
    else place(e, shownWords !== before); // a state change's announcement is not overwritten
    alertLine(true);
  } else if (e.state === "ACTIVE") {
    show("active");
  } else if (e.state === "CLOSED") {
    // Final: the room closed while waiting (updates stops following it).
    show(e.reason === "sold_out" ? "soldout" : "saleended");
  } else {
    show(e.reason === "not_claimed" ? "unclaimed" : "ended");
  }
}

// The turn alert (opt-in): a sound, a vibration and, where the buyer allowed
// it, a notification when the turn comes while the tab is in the background.
let alertOn = false;
let audio = null;
function alertLine(show) {
  $("alert-line").hidden = !show;
}
$("alert").addEventListener("change", async (ev) => {
  alertOn = ev.target.checked;
  if (!alertOn) return;
  try {
    audio ??= new AudioContext(); // created on the buyer's click: allowed to play later
  } catch {}
  try {
    if (globalThis.Notification?.permission === "default") await Notification.requestPermission();
  } catch {}
});
function turnAlert() {
  if (!alertOn) return;
  try {
    navigator.vibrate?.([200, 100, 200]);
  } catch {}
  try {
    if (audio) {
      const o = audio.createOscillator(), g = audio.createGain();
      o.frequency.value = 880;
      g.gain.value = 0.2;
      o.connect(g).connect(audio.destination);
      o.start();
      o.stop(audio.currentTime + 0.4);
    }
  } catch {}
  try {
    if (document.hidden && globalThis.Notification?.permission === "granted") new Notification(document.title, { body: t("alert.turn"), lang });
  } catch {}
}

let continuing = false;
async function proceed() {
  if (continuing) return;
  continuing = true;
  current = null; // admitted: never leave from here on
  alertLine(false);
  turnAlert();
  const button = $("continue-button");
  button.disabled = true;
  show("active", t("state.continuing.message"));
  announce(t("live.turn"));
  try {
    await client.exchange(room, token); // visitor mode: sets the admission cookie
    try {
      sessionStorage.removeItem(startKey);
    } catch {}
    if (d.return) {
      location.assign(d.return);
    } else {
      // One Continue control: the form gives way to the link.
      show("active", t("state.continued.message"));
      $("continue").hidden = true;
      $("home").hidden = false;
    }
  } catch (err) {
    continuing = false;
    button.disabled = false;
    if (err.code === "not_admitted") return follow();
    if (err.code === "expired" || err.code === "revoked" || err.code === "completed") return show("ended");
    show("active", t("exchange.failed", { code: err.code ?? "network" }));
    button.focus();
  }
}

$("continue").addEventListener("submit", (ev) => {
  ev.preventDefault();
  proceed();
});

// Following the line. A lost connection is retried with backoff; the
// network coming back (online) or the tab becoming visible again restarts
// the follow at once, so the page recovers within a second instead of at
// its next backoff.
let following = null;
async function follow() {
  const ctl = new AbortController();
  following?.abort();
  following = ctl;
  const { signal } = ctl;
  try {
    if (!token) {
      // The server could not enter (503: retried after Retry-After), or the
      // first enter needs a proof of work (state checking): the client
      // solves it and enters; data-pow-ms and data-pow-hashes tell how long
      // it took and how many SHA-256 it tried.
      const invite = d.state === "checking" ? new URLSearchParams(location.search).get("invite") ?? undefined : undefined;
      const e = await client.enter(room, {
        invite,
        onPoW: (ev) => {
          if (ev.state === "solving") show("checking");
          else [d.powMs, d.powHashes] = [String(ev.took), String(ev.number + 1)];
        },
      });
      if (signal.aborted) return;
      render(e);
      if (e.state === "ACTIVE") return proceed();
      if (e.state !== "WAITING") return;
    }
    const e = await client.updates(room, token, render, {
      signal,
      onError: () => show("reconnecting"),
      beacon: d.beacon === "1", // the issuer asks for the room beacon (FLASHGATE_BEACON)
    });
    if (e.state === "ACTIVE") proceed();
  } catch (err) {
    if (signal.aborted) return; // restarted (online, visible) or stopped
    if (err.code === "room_closed") show("closed");
    else if (err.code === "banned") show("banned");
    else if (err.code === "unknown_room") show("unknown");
    else show("error", t("state.error.message", { code: err.code ?? "network" }));
  }
  if (following === ctl) following = null;
}

function recover() {
  if (following && root.dataset.state === "reconnecting" && !document.hidden) follow();
}
addEventListener("online", recover);
document.addEventListener("visibilitychange", recover);

if (d.position) place({ position: Number(d.position), ahead: Number(d.ahead), estimated_wait_ms: d.waitMs ? Number(d.waitMs) : -1 }, true);
else if (d.preQueue) unplaced();
shownWords = d.state;
if (d.state === "opens") countdown();
if (["waiting", "paused", "opens", "reconnecting"].includes(d.state)) alertLine(true);
// A preview (GET /admin/rooms/{room}/preview) shows the state, and follows nothing.
if (!d.preview) {
  if (d.state === "active") proceed();
  else if (["waiting", "paused", "opens", "reconnecting", "checking"].includes(d.state)) follow();
}
// wait.js is running and follows the line: the page is live (ms since navigation start).
d.readyMs = String(Math.round(performance.now()));
