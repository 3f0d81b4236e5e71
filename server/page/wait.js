// wait.js drives the waiting page (wait.html): live updates over the
// browser client, the countdown, and the continuation when admitted.
import { createClient } from "/flashgate-client.js";

const root = document.getElementById("fg");
const $ = (id) => document.getElementById(id);
const d = root.dataset;
const room = d.room;
let token = d.token;
const client = createClient({ base: "" });
// The entry last shown. The page does not leave on pagehide
// (client.leaveOnPagehide): pagehide cannot tell closing the tab from
// reloading it, and a reload must keep the place; an admission nobody claims
// ends with the room's arrival window instead (docs/browser.md#the-waiting-room-page).
let current = token && ["waiting", "paused", "opens", "reconnecting"].includes(d.state) ? { state: "WAITING", waiting_token: token } : null;

const TEXT = {
  waiting: ["You are in line", "Keep this page open: it updates by itself, and takes you on when it is your turn."],
  priority: ["You are in the priority line", "You were invited: the priority line goes first. Keep this page open: it takes you on when it is your turn."],
  paused: ["Paused", "The waiting room is paused. Keep this page open: your place in line is saved."],
  opens: ["Opens soon", "The sale has not opened yet. Keep this page open: your place in line is saved."],
  active: ["It’s your turn", "Continue now: your turn is held for a limited time."],
  continuing: ["It’s your turn", "Taking you to the shop…"],
  closed: ["Sold out", "This sale is closed: it is sold out or has ended."],
  soldout: ["Sold out", "Everything in this sale has been sold. Thank you for waiting."],
  saleended: ["This sale has ended", "The waiting room closed before your turn came."],
  ended: ["Your turn has ended", "Your turn was used or has lapsed. Reload the page to line up again."],
  unclaimed: ["Your turn has lapsed", "Your turn was held for you for a limited time and has passed to the next in line. Reload the page to line up again."],
  reconnecting: ["Reconnecting…", "The waiting room is busy for a moment. Your place in line is kept."],
  error: ["Something went wrong", "The waiting room could not answer. Reload the page to try again."],
  unknown: ["No such waiting room", "Check the link you followed."],
  checking: ["Checking your browser…", "This takes a second or two, then you join the line. Keep this page open."],
};

// The pre-queue of a shuffle room: places are drawn when the sale opens (page.go has the same words).
const PRE_QUEUE = "You’re in the pre-queue: places are drawn at random when the sale opens, so everyone here has the same chance. Keep this page open: your place appears once it is drawn.";

function show(state, message) {
  const [h, m] = TEXT[state] ?? TEXT.error;
  root.dataset.state = { continuing: "active", unclaimed: "ended", soldout: "closed", saleended: "closed", priority: "waiting" }[state] ?? state;
  $("heading").textContent = h;
  $("message").textContent = message ?? m;
  // The room's name only once the server or an entry showed the room exists
  // (data-name): never the path's text of an unknown room.
  const name = d.title || d.name;
  document.title = name ? `${h} · ${name}` : h;
}

function waitWords(ms) {
  if (ms == null || ms < 0) return "unknown";
  if (ms < 60000) return "less than a minute";
  if (ms < 90 * 60000) {
    const m = Math.round(ms / 60000);
    return m === 1 ? "about 1 minute" : `about ${m} minutes`;
  }
  return `about ${Math.round(ms / 3600000)} hours`;
}

// The progress bar runs from the position at entry (remembered per tab) to the head.
const startKey = `flashgate:${room}:start`;
let lastAnnounced = null;

function place(e) {
  $("position").textContent = String(e.position);
  $("ahead").textContent = String(e.ahead);
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
    $("live").textContent = e.ahead === 0 ? "You are next in line." : `You are number ${e.position} in line, ${e.ahead} ahead of you.`;
  }
}

// unplaced shows an entry of the pre-queue: no place yet (pre_queue).
function unplaced() {
  $("position").textContent = "drawn at opening";
  $("ahead").textContent = "–";
  $("eta").textContent = "unknown";
  $("progress").hidden = true;
  if (lastAnnounced !== "pre-queue") {
    lastAnnounced = "pre-queue";
    $("live").textContent = "You are in the pre-queue. Places are drawn at random when the sale opens.";
  }
}

let countdownTimer = 0;
function countdown() {
  const at = Number(d.opensAt);
  clearInterval(countdownTimer);
  if (!at) return false;
  const tick = () => {
    const s = Math.max(0, Math.round((at - Date.now()) / 1000));
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    $("countdown").textContent = (h ? `${h} h ` : "") + `${m} min ${String(r).padStart(2, "0")} s`;
    if (s === 0) clearInterval(countdownTimer);
  };
  tick();
  countdownTimer = setInterval(tick, 1000);
  return true;
}

function render(e) {
  if (e.waiting_token) token = e.waiting_token;
  d.name ||= room; // an entry: the room exists
  current = e;
  if (e.state === "WAITING") {
    // The entry carries the opening time while it is ahead: the countdown
    // follows it (an operator may move it).
    if (e.opens_at_ms) d.opensAt = String(e.opens_at_ms);
    if (e.room_state === "closed") return show("closed");
    const message = e.pre_queue ? PRE_QUEUE : undefined;
    if (e.room_state === "paused") show(Number(d.opensAt) > Date.now() && countdown() ? "opens" : "paused", message);
    else show(e.lane === "priority" ? "priority" : "waiting", message);
    if (e.pre_queue) unplaced();
    else place(e);
  } else if (e.state === "ACTIVE") {
    show("active");
  } else if (e.state === "CLOSED") {
    // Final: the room closed while waiting (updates stops following it).
    show(e.reason === "sold_out" ? "soldout" : "saleended");
  } else {
    show(e.reason === "not_claimed" ? "unclaimed" : "ended");
  }
}

let continuing = false;
async function proceed() {
  if (continuing) return;
  continuing = true;
  current = null; // admitted: never leave from here on
  const button = $("continue-button");
  button.disabled = true;
  show("continuing");
  $("live").textContent = "It’s your turn. Taking you to the shop.";
  try {
    await client.exchange(room, token); // visitor mode: sets the admission cookie
    try {
      sessionStorage.removeItem(startKey);
    } catch {}
    if (d.return) {
      location.assign(d.return);
    } else {
      show("continuing", "You’re in. Continue to the shop.");
      $("continue").hidden = true;
      $("home").hidden = false;
    }
  } catch (err) {
    continuing = false;
    button.disabled = false;
    if (err.code === "not_admitted") return follow();
    if (err.code === "expired" || err.code === "revoked" || err.code === "completed") return show("ended");
    show("active", `That did not work (${err.code ?? "network"}). Try again.`);
    button.focus();
  }
}

$("continue").addEventListener("submit", (ev) => {
  ev.preventDefault();
  proceed();
});

async function follow() {
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
      render(e);
      if (e.state === "ACTIVE") return proceed();
      if (e.state !== "WAITING") return;
    }
    const e = await client.updates(room, token, render, {
      onError: () => show("reconnecting"),
    });
    if (e.state === "ACTIVE") proceed();
  } catch (err) {
    if (err.code === "room_closed") show("closed");
    else if (err.code === "banned") show("ended", "You were removed from this waiting room for now.");
    else if (err.code === "unknown_room") show("unknown");
    else show("error", `The waiting room could not answer (${err.code ?? "network"}). Reload the page to try again.`);
  }
}

if (d.position) place({ position: Number(d.position), ahead: Number($("ahead").textContent) });
else if (d.preQueue) unplaced();
if (d.state === "opens") countdown();
if (d.state === "active") proceed();
else if (["waiting", "paused", "opens", "reconnecting", "checking"].includes(d.state)) follow();
