// browse.js - drives headless Chromium through the DevTools protocol on a
// pipe (--remote-debugging-pipe: JSON messages ending in a NUL byte on the
// browser's descriptors 3 and 4), so nothing is needed beyond Node and
// Debian's chromium.  The page tests (tests/lisp/test-pages.lisp) run it.
//
//   node tests/ref/browse.js STEPS.json
//
// STEPS.json: {"url": URL, "deadline": SECONDS, "width": W, "height": H,
//              "steps": [STEP...]}, each STEP one of
//   {"type": SELECTOR, "text": T}   focus the field, select what it holds,
//                                   and type T (Input.insertText)
//   {"click": SELECTOR}             a mouse click at the element's centre
//   {"press": KEY, "ctrl": BOOL}    a key (Enter, Tab, ...) pressed and let go
//                                   in the focused element, Ctrl held or not
//   {"wait": EXPR}                  evaluate EXPR every 50 ms until it is true
//   {"eval": EXPR}                  evaluate EXPR; its value (as JSON) is
//                                   the next entry of "results"
//   {"screenshot": PATH}            the whole page as a PNG file
// Prints one JSON object: {"results": [...], "errors": [...]}, the errors
// every console.error, uncaught exception and error the browser logged
// (a failed request among them) from the page's load on.  Exits 1 with a
// line on stderr when a step fails or the deadline (default 60 s) passes;
// the browser is killed, with its process group, however this ends.
"use strict";
const { spawn } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");

const job = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const deadline = Date.now() + 1000 * (job.deadline || 60);
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "browse-"));
let browser = null;

function cleanUp() {
  if (browser && browser.exitCode === null && browser.signalCode === null) {
    try { process.kill(-browser.pid, "SIGKILL"); } catch (e) { /* already gone */ }
    try { browser.kill("SIGKILL"); } catch (e) { /* already gone */ }
  }
  try { fs.rmSync(profile, { recursive: true, force: true }); } catch (e) { /* best effort */ }
}

function fail(message) {
  process.stderr.write("browse.js: " + message + "\n");
  cleanUp();
  process.exit(1);
}

process.on("exit", cleanUp);
process.on("SIGTERM", () => fail("terminated"));
process.on("SIGINT", () => fail("interrupted"));
const timer = setTimeout(() => fail("the deadline of " + (job.deadline || 60) + " s passed"),
                         deadline - Date.now());

browser = spawn(process.env.CHROMIUM || "chromium",
  ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
   "--remote-debugging-pipe", "--user-data-dir=" + profile, "--no-first-run",
   "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
   "--disable-component-update", "--disable-sync", "--no-proxy-server", "--hide-scrollbars",
   "--mute-audio", "about:blank"],
  { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"], detached: true });
let browserLog = "";
browser.stdio[2].on("data", (d) => { browserLog = (browserLog + d).slice(-4000); });
browser.on("exit", (code, signal) => {
  if (!finished) fail("chromium ended (" + (signal || "status " + code) + ") before the steps did: " +
                      browserLog.trim().split("\n").slice(-3).join(" | "));
});
browser.on("error", (e) => fail("cannot start chromium: " + e.message));

// The protocol: each command has an id, answered by the message with it;
// events have a method and, on a page's session, its sessionId.
let nextId = 1, finished = false, buffer = Buffer.alloc(0);
const pending = new Map(), listeners = [];
browser.stdio[4].on("data", (chunk) => {
  buffer = Buffer.concat([buffer, chunk]);
  let end;
  while ((end = buffer.indexOf(0)) >= 0) {
    const message = JSON.parse(buffer.subarray(0, end).toString("utf8"));
    buffer = buffer.subarray(end + 1);
    if (message.id && pending.has(message.id)) {
      const { resolve, reject, method } = pending.get(message.id);
      pending.delete(message.id);
      if (message.error) reject(new Error(method + ": " + message.error.message));
      else resolve(message.result);
    } else if (message.method) {
      for (const l of listeners) l(message);
    }
  }
});
browser.stdio[3].on("error", (e) => fail("writing to chromium: " + e.message));

function send(method, params = {}, sessionId = undefined) {
  const id = nextId++;
  const message = { id, method, params };
  if (sessionId) message.sessionId = sessionId;
  browser.stdio[3].write(JSON.stringify(message) + "\0");
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject, method }));
}

function event(method, sessionId) {
  return new Promise((resolve) => {
    const l = (m) => {
      if (m.method === method && m.sessionId === sessionId) {
        listeners.splice(listeners.indexOf(l), 1);
        resolve(m.params);
      }
    };
    listeners.push(l);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const errors = [], results = [];
  const { targetId } = await send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
  const page = (method, params) => send(method, params, sessionId);
  listeners.push((m) => {
    if (m.sessionId !== sessionId) return;
    const p = m.params;
    if (m.method === "Runtime.consoleAPICalled" && (p.type === "error" || p.type === "assert")) {
      errors.push("console." + p.type + ": " +
                  p.args.map((a) => a.value !== undefined ? String(a.value) : a.description).join(" "));
    } else if (m.method === "Runtime.exceptionThrown") {
      const d = p.exceptionDetails;
      errors.push("exception: " + ((d.exception && d.exception.description) || d.text));
    } else if (m.method === "Log.entryAdded" && p.entry.level === "error") {
      errors.push("log: " + p.entry.text + (p.entry.url ? " (" + p.entry.url + ")" : ""));
    }
  });
  await page("Runtime.enable");
  await page("Log.enable");
  await page("Page.enable");
  await page("Emulation.setDeviceMetricsOverride",
             { width: job.width || 1200, height: job.height || 800, deviceScaleFactor: 1, mobile: false });
  const loaded = event("Page.loadEventFired", sessionId);
  const navigated = await page("Page.navigate", { url: job.url });
  if (navigated.errorText) throw new Error("cannot open " + job.url + ": " + navigated.errorText);
  await loaded;

  const evaluate = async (expression) => {
    const r = await page("Runtime.evaluate", { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) {
      throw new Error(expression + ": " + ((r.exceptionDetails.exception &&
                                           r.exceptionDetails.exception.description) ||
                                          r.exceptionDetails.text));
    }
    return r.result.value;
  };
  const element = (selector) => "document.querySelector(" + JSON.stringify(selector) + ")";
  for (const step of job.steps || []) {
    if (step.type !== undefined) {
      const found = await evaluate("(() => { const e = " + element(step.type) +
                                   "; if (!e) return false; e.focus(); e.select && e.select(); return true; })()");
      if (!found) throw new Error("no element " + step.type + " to type into");
      await page("Input.insertText", { text: step.text });
    } else if (step.click !== undefined) {
      const box = await evaluate("(() => { const e = " + element(step.click) +
                                 "; if (!e) return null; e.scrollIntoView({block: 'center'});" +
                                 " const r = e.getBoundingClientRect();" +
                                 " return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()");
      if (!box) throw new Error("no element " + step.click + " to click");
      for (const type of ["mousePressed", "mouseReleased"]) {
        await page("Input.dispatchMouseEvent", { type, x: box.x, y: box.y, button: "left", clickCount: 1 });
      }
    } else if (step.press !== undefined) {
      const codes = { Enter: 13, Tab: 9, Escape: 27 };
      if (!(step.press in codes)) throw new Error("no key " + step.press + " to press");
      for (const type of ["rawKeyDown", "keyUp"]) {
        await page("Input.dispatchKeyEvent", {
          type, key: step.press, code: step.press, windowsVirtualKeyCode: codes[step.press],
          modifiers: step.ctrl ? 2 : 0 });
      }
    } else if (step.wait !== undefined) {
      while (!(await evaluate(step.wait))) {
        if (Date.now() > deadline) throw new Error("waiting for " + step.wait + ": the deadline passed");
        await sleep(50);
      }
    } else if (step.eval !== undefined) {
      const value = await evaluate(step.eval);
      results.push(value === undefined ? null : value);
    } else if (step.screenshot !== undefined) {
      const metrics = await page("Page.getLayoutMetrics");
      const size = metrics.cssContentSize || metrics.contentSize;
      const shot = await page("Page.captureScreenshot", {
        format: "png", captureBeyondViewport: true,
        clip: { x: 0, y: 0, width: Math.ceil(size.width), height: Math.ceil(size.height), scale: 1 } });
      fs.writeFileSync(step.screenshot, Buffer.from(shot.data, "base64"));
    } else {
      throw new Error("unknown step " + JSON.stringify(step));
    }
  }
  // Let what the last step started log its errors before they are read.
  await evaluate("new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)))");
  return { results, errors };
}

// Close the browser the polite way first, so that it waits for its own
// processes, within 5 s; cleanUp kills what is left.
async function closeBrowser() {
  if (browser.exitCode !== null || browser.signalCode !== null) return;
  const ended = new Promise((r) => browser.once("exit", r));
  send("Browser.close").catch(() => {});
  await Promise.race([ended, sleep(5000)]);
}

main().then(async (out) => {
  finished = true;
  process.stdout.write(JSON.stringify(out) + "\n");
  await closeBrowser();
  clearTimeout(timer);
  cleanUp();
  process.exit(0);
}, (e) => fail(e.message));
