// driver.mjs: a line-oriented remote control of Debian's Chromium for
// browser_test.go. It launches the browser (playwright-core, no downloaded
// browser build), prints {"ready":true,"version":…}, then reads one JSON
// command per line on stdin and answers one JSON line on stdout:
//
//   {"id":1,"op":"goto","page":"p1","url":"…"} → {"id":1,"ok":true,"result":{…}}
//                                               → {"id":1,"ok":false,"error":"…"}
//
// Contexts and pages are named by the caller. Each context is a fresh
// profile (its own cookie jar); a page records every main-frame navigation
// so the test can see redirects it went through.
import { chromium } from "playwright-core";
import readline from "node:readline";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

let browser;
try {
  browser = await chromium.launch({
    executablePath,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    timeout: 30000,
  });
} catch (err) {
  out({ ready: false, error: `cannot launch ${executablePath}: ${err.message}` });
  process.exit(1);
}
out({ ready: true, version: browser.version() });

const contexts = new Map();
const pages = new Map(); // name → {page, ctx, history: [url…]}

function pageOf(name) {
  const p = pages.get(name);
  if (!p) throw new Error(`no page ${name}`);
  return p;
}

async function openPage(ctxName, name) {
  const ctx = contexts.get(ctxName);
  if (!ctx) throw new Error(`no context ${ctxName}`);
  const page = await ctx.newPage();
  const entry = { page, ctx, history: [] };
  page.on("framenavigated", (f) => {
    if (f === page.mainFrame()) entry.history.push(f.url());
  });
  // Redirects never commit a document: record each hop of the chain.
  page.on("request", (r) => {
    if (r.isNavigationRequest() && r.frame() === page.mainFrame()) entry.history.push(r.url());
  });
  pages.set(name, entry);
}

// view: what the waiting page (or any page) shows now.
async function view(page) {
  return page.evaluate(() => {
    const fg = document.getElementById("fg");
    const text = (id) => document.getElementById(id)?.textContent ?? null;
    return {
      url: location.href,
      title: document.title,
      state: fg?.dataset.state ?? null,
      token: fg?.dataset.token ?? null,
      position: text("position"),
      ahead: text("ahead"),
      heading: text("heading"),
      powMs: fg?.dataset.powMs ?? null,
      powHashes: fg?.dataset.powHashes ?? null,
      ready: fg?.dataset.readyMs ?? null,
      live: document.getElementById("live")?.textContent ?? null,
      body: document.body?.innerText.slice(0, 2000) ?? "",
    };
  });
}

// viewNoJS: the same, read through Playwright's own world (works with
// JavaScript disabled in the page).
async function viewNoJS(page) {
  const attr = async (sel, name) => (await page.$(sel)) && page.getAttribute(sel, name);
  const text = async (sel) => ((await page.$(sel)) ? page.textContent(sel) : null);
  return {
    url: page.url(),
    title: await page.title(),
    state: await attr("#fg", "data-state"),
    position: await text("#position"),
    ahead: await text("#ahead"),
    heading: await text("#heading"),
    body: ((await text("body")) ?? "").slice(0, 2000),
  };
}

const ops = {
  async newContext({ ctx, js = true, headers, width = 800, height = 720 }) {
    contexts.set(ctx, await browser.newContext({ javaScriptEnabled: js, viewport: { width, height }, extraHTTPHeaders: headers }));
    return {};
  },
  async setViewport({ page, width, height }) {
    await pageOf(page).page.setViewportSize({ width, height });
    return {};
  },
  // axe runs axe-core (WCAG 2.0–2.2 A and AA rules) on the page: the
  // violations, each with its nodes' targets. Evaluated over CDP, which
  // the page's CSP does not govern.
  async axe({ page }) {
    const p = pageOf(page).page;
    await p.evaluate(axeSource);
    return p.evaluate(async () => {
      const r = await globalThis.axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"] } });
      return { violations: r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(" ")) })) };
    });
  },
  // texts: every text the page shows (text nodes and accessible labels,
  // the language switcher's options left out: each is its language's own
  // name), with the document's lang and dir.
  async texts({ page }) {
    return pageOf(page).page.evaluate(() => {
      const out = [];
      const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        const el = n.parentElement;
        if (!el || el.closest("select,script,style,noscript")) continue;
        if (n.textContent.trim()) out.push(n.textContent.trim());
      }
      for (const el of document.querySelectorAll("[aria-label]")) out.push(el.getAttribute("aria-label"));
      out.push(document.title);
      return { texts: out, lang: document.documentElement.lang, dir: document.documentElement.dir };
    });
  },
  // slow3g emulates DevTools' Slow 3G on the page (2 s latency per
  // request, 50 kB/s each way) over CDP.
  async slow3g({ page }) {
    const p = pageOf(page);
    const cdp = await p.ctx.newCDPSession(p.page);
    await cdp.send("Network.enable");
    await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 2000, downloadThroughput: 50000, uploadThroughput: 50000 });
    p.cdp = cdp;
    return {};
  },
  async fastNetwork({ page }) {
    const p = pageOf(page);
    await p.cdp?.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
    return {};
  },
  async setOffline({ ctx, offline }) {
    await contexts.get(ctx).setOffline(offline);
    return { at: Date.now() };
  },
  // timings: the first paint and first contentful paint, wait.js's
  // readiness and first live entry (ms since navigation start), and the
  // bytes the page and its assets took on the wire (compressed bodies;
  // the event stream, which never finishes, left out).
  async timings({ page }) {
    return pageOf(page).page.evaluate(() => {
      const paint = Object.fromEntries(performance.getEntriesByType("paint").map((e) => [e.name, e.startTime]));
      const nav = performance.getEntriesByType("navigation")[0];
      const res = performance.getEntriesByType("resource").filter((r) => !r.name.includes("/events"));
      const d = document.getElementById("fg")?.dataset ?? {};
      return {
        firstPaint: paint["first-paint"] ?? null,
        firstContentfulPaint: paint["first-contentful-paint"] ?? null,
        readyMs: d.readyMs ? Number(d.readyMs) : null,
        firstEntryMs: d.firstEntryMs ? Number(d.firstEntryMs) : null,
        documentBytes: nav?.encodedBodySize ?? null,
        assetBytes: res.reduce((s, r) => s + r.encodedBodySize, 0),
        assets: res.map((r) => r.name),
        now: Date.now(),
      };
    });
  },
  async now() {
    return { at: Date.now() };
  },
  async newPage({ ctx, page }) {
    await openPage(ctx, page);
    return {};
  },
  async goto({ page, url }) {
    const p = pageOf(page);
    const resp = await p.page.goto(url, { waitUntil: "domcontentloaded" });
    return { url: p.page.url(), status: resp ? resp.status() : 0 };
  },
  async reload({ page }) {
    const p = pageOf(page);
    const resp = await p.page.reload({ waitUntil: "domcontentloaded" });
    return { url: p.page.url(), status: resp ? resp.status() : 0 };
  },
  async view({ page, js = true }) {
    const p = pageOf(page);
    return js ? view(p.page) : viewNoJS(p.page);
  },
  async history({ page }) {
    return { urls: pageOf(page).history };
  },
  async waitURL({ page, prefix, timeout = 15000 }) {
    const p = pageOf(page);
    await p.page.waitForURL((u) => u.href.startsWith(prefix), { timeout, waitUntil: "domcontentloaded" });
    return { url: p.page.url() };
  },
  async click({ page, selector }) {
    await pageOf(page).page.click(selector, { timeout: 10000 });
    return {};
  },
  // Screenshots are artifacts, not assertions: a page that is navigating
  // (or a slow machine) may not give a stable frame in time. A failed shot
  // is reported as a warning, never as an error.
  async screenshot({ page, path, fullPage = true }) {
    try {
      await pageOf(page).page.screenshot({ path, fullPage, timeout: 10000 });
      return { path };
    } catch (err) {
      return { path, warning: String(err) };
    }
  },
  async cookies({ ctx }) {
    const c = contexts.get(ctx);
    if (!c) throw new Error(`no context ${ctx}`);
    return { cookies: await c.cookies() };
  },
  async addCookies({ ctx, cookies }) {
    await contexts.get(ctx).addCookies(cookies);
    return {};
  },
  // throttle slows the page's CPU rate× (CDP Emulation.setCPUThrottlingRate;
  // 1 = none): a phone-class CPU for the proof-of-work measurement.
  async throttle({ page, rate }) {
    const p = pageOf(page);
    const cdp = await p.ctx.newCDPSession(p.page);
    await cdp.send("Emulation.setCPUThrottlingRate", { rate });
    return {};
  },
  async closePage({ page }) {
    await pageOf(page).page.close();
    pages.delete(page);
    return {};
  },
};

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let cmd;
  try {
    cmd = JSON.parse(line);
    const f = ops[cmd.op];
    if (!f) throw new Error(`unknown op ${cmd.op}`);
    out({ id: cmd.id, ok: true, result: await f(cmd) });
  } catch (err) {
    out({ id: cmd?.id, ok: false, error: String(err?.message ?? err) });
  }
}
await browser.close();
