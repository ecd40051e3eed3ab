"""The JavaScript the wrapper puts into every document before the page's own scripts: animation
frames on a 1/60 s grid, the page's time and randomness made the launch's, CSS animations held
to the page's clock, and a look at what the page shows (docs/design.md, "The browser wrapper")."""

from __future__ import annotations

import json
from typing import Any

from ._look import LIMITS, LOOK

#: Milliseconds of page time per frame, and the grid (the same integer formula in JS).
FRAME_MS = 1000.0 / 60.0
#: Console messages and uncaught errors a frame passes on, at most (the rest are counted and
#: said in one event a look), and the characters of one console message's text.
CONSOLE_CAP = 50
ERROR_CAP = 20
CONSOLE_CHARS = 4000
#: Renderings at most after one frame while CSS animations have events to deliver (each is
#: one of the browser's own frames, about 17 ms of real time).
MAX_RENDERS = 4


def frame_ms(k: int) -> int:
    """``T(k)``: the page time (whole ms) by which frame ``k`` has run."""
    return (1000 * k + 59) // 60


def frame_at(ticks: float) -> int:
    """The last frame ``k`` with ``T(k) <= ticks``."""
    k = max(0, int(ticks * 60 // 1000))
    while frame_ms(k + 1) <= ticks:
        k += 1
    while k > 0 and frame_ms(k) > ticks:
        k -= 1
    return k


def init_script(*, seed: int, start_ms: int) -> str:
    """:data:`INIT`: ``Date`` at ``start_ms`` when the first document starts (a later one goes
    on from where the one before it left), the random generators from ``seed`` and that
    moment, and ``look()`` (``_look``)."""
    config = {"seed": [seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF], "start": start_ms,
              "frameMs": FRAME_MS, "maxRenders": MAX_RENDERS, "key": HANDOVER, "look": LIMITS,
              "consoleCap": CONSOLE_CAP, "errorCap": ERROR_CAP, "consoleChars": CONSOLE_CHARS}
    return INIT.replace("__CONFIG__", json.dumps(config)).replace("__LOOK__", LOOK)


#: Where a document leaving (a navigation, a reload) puts its ``Date.now()`` for the next one of
#: its origin, in ``sessionStorage``; the next one's script takes it out before the page runs.
HANDOVER = "__gameBridgeTime"

INIT = r"""
(() => {
  if (Object.getOwnPropertyDescriptor(window, '__gameBridge')) return;
  const CONFIG = __CONFIG__;
  const pw = globalThis.__pwClock;
  const clock = pw && pw.controller;
  const builtins = (pw && pw.builtins) || {};
  const nativeFrame = builtins.requestAnimationFrame;
  const setT = window.setTimeout;
  const { defineProperty, freeze, getOwnPropertyDescriptor } = Object;
  const getAnimations = Document.prototype.getAnimations;
  const addListener = EventTarget.prototype.addEventListener;
  const apply = Reflect.apply, stringSlice = String.prototype.slice;
  const toJson = JSON.stringify, fromJson = JSON.parse;
  const Imul = Math.imul, floor = Math.floor, max = Math.max;

  // ---- time: this document's Date starts where the page's time is (a new document of the
  // same origin goes on from where the last one left; a same-origin frame takes its parent's),
  // performance.now at 0.
  let epoch = CONFIG.start;
  const top = window.parent === window;
  try {
    if (!top && window.parent.__gameBridge) epoch = window.parent.Date.now();
  } catch (e) { /* a frame of another origin: the launch's time */ }
  let arrived = null;  // what the document before this one handed over: {time, frames}
  if (top) {
    try {
      const left = sessionStorage.getItem(CONFIG.key);
      if (left !== null) {
        sessionStorage.removeItem(CONFIG.key);
        const handed = JSON.parse(left);
        if (handed && Number(handed.time) >= CONFIG.start) { epoch = Number(handed.time); arrived = handed; }
      }
    } catch (e) { /* no storage here (an opaque origin), or not ours */ }
  }
  if (clock) clock.setSystemTime(epoch);
  const elapsed = max(0, epoch - CONFIG.start);

  // ---- randomness: Math.random and crypto from the launch's seed (and where in page time
  // this document started), so the same seed and inputs give the same page.
  const mix = (h, v) => { h = Imul(h ^ v, 0x85ebca6b); h ^= h >>> 13; h = Imul(h, 0xc2b2ae35); return (h ^ (h >>> 16)) >>> 0; };
  let a = mix(0x9e3779b9, CONFIG.seed[0]), b = mix(a, CONFIG.seed[1]);
  let c = mix(b, elapsed % 4294967296), d = mix(c, floor(elapsed / 4294967296));
  const next = () => {  // sfc32
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
    let t = (a + b) | 0; a = b ^ (b >>> 9); b = (c + (c << 3)) | 0; c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0; t = (t + d) | 0; c = (c + t) | 0;
    return t >>> 0;
  };
  for (let i = 0; i < 12; i++) next();
  const random = function random() { return ((next() >>> 5) * 67108864 + (next() >>> 6)) / 9007199254740992; };
  defineProperty(Math, 'random', { value: random, writable: true, configurable: true });
  if (typeof Crypto === 'function' && Crypto.prototype.getRandomValues) {
    const fill = Crypto.prototype.getRandomValues;
    const getRandomValues = function getRandomValues(array) {
      const out = fill.call(this, array);  // the browser's checks: the type, at most 65536 bytes
      const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
      for (let i = 0; i < bytes.length; i += 4) {
        const v = next();
        for (let j = 0; j < 4 && i + j < bytes.length; j++) bytes[i + j] = (v >>> (8 * j)) & 255;
      }
      return out;
    };
    defineProperty(Crypto.prototype, 'getRandomValues', { value: getRandomValues, writable: true, configurable: true });
    if (Crypto.prototype.randomUUID) {
      const randomUUID = function randomUUID() {
        const bytes = getRandomValues.call(this, new Uint8Array(16));
        bytes[6] = (bytes[6] & 0x0f) | 0x40; bytes[8] = (bytes[8] & 0x3f) | 0x80;
        const hex = Array.prototype.map.call(bytes, (x) => (x + 256).toString(16).slice(1)).join('');
        return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
      };
      defineProperty(Crypto.prototype, 'randomUUID', { value: randomUUID, writable: true, configurable: true });
    }
  }

  // ---- popups are refused in the page (one page per instance), and console and error floods
  // are cut to a few a frame (the rest counted, and said in one event), before they cost a
  // round trip each; a console message's text is cut to a few thousand characters.
  const quota = { console: 0, errors: 0, droppedConsole: 0, droppedErrors: 0, popups: 0 };
  const refusePopup = function open() { quota.popups++; return null; };
  defineProperty(window, 'open', { value: refusePopup, writable: false, configurable: false });
  addListener.call(document, 'click', (event) => {
    const link = event.target && event.target.closest ? event.target.closest('a[target], area[target]') : null;
    const target = link && String(link.target || '').toLowerCase();
    if (target && target !== '_self' && target !== '_top' && target !== '_parent' && !(target in window.frames)) {
      event.preventDefault();
      quota.popups++;
    }
  }, true);
  for (const level of ['log', 'info', 'warn', 'error', 'debug', 'trace', 'dir', 'dirxml', 'table', 'assert', 'count', 'timeLog']) {
    const native = console[level];
    if (typeof native !== 'function') continue;
    defineProperty(console, level, { writable: true, configurable: true, value: function (...args) {
      if (++quota.console > CONFIG.consoleCap) { quota.droppedConsole++; return undefined; }
      for (let i = 0; i < args.length; i++) {
        const arg = args[i];
        if (typeof arg === 'string' && arg.length > CONFIG.consoleChars)
          args[i] = apply(stringSlice, arg, [0, CONFIG.consoleChars]) + `... (${arg.length} characters)`;
      }
      return apply(native, console, args);
    } });
  }
  const overErrors = (event) => { if (++quota.errors > CONFIG.errorCap) { quota.droppedErrors++; event.preventDefault(); } };
  addListener.call(window, 'error', overErrors, true);
  addListener.call(window, 'unhandledrejection', overErrors, true);
  const nextQuota = () => { quota.console = 0; quota.errors = 0; };
  // (the library's clock rethrows only the first error of the timers it runs at once: each
  // timer's own is reported as it happens, as a browser would, and counted with the rest)
  for (const name of ['setTimeout', 'setInterval']) {
    const timer = window[name];
    if (typeof timer !== 'function') continue;
    window[name] = { [name](callback, ...rest) {
      if (typeof callback !== 'function') return apply(timer, window, [callback, ...rest]);
      return apply(timer, window, [function (...args) {
        try { return apply(callback, this, args); } catch (e) { report(e); return undefined; }
      }, ...rest]);
    } }[name];
  }

  // ---- animation frames on the grid T(k) = ceil(k * 1000 / 60) ms, on the clock's timers.
  const T = (k) => floor((1000 * k + 59) / 60);
  const counts = { frames: 0, callbacks: 0, requested: 0 };
  let lastK = -1, nextId = 1, batch = null;
  const report = (e) => {
    if (typeof reportError === 'function') reportError(e); else setT(() => { throw e; }, 0);
  };
  function runBatch() {
    const run = batch; batch = null; lastK = run.k; counts.frames++;
    const stamp = run.k * 1000 / 60;
    for (const cb of run.cbs.values()) {
      counts.callbacks++;
      try { cb(stamp); } catch (e) { report(e); }
    }
  }
  window.requestAnimationFrame = function requestAnimationFrame(cb) {
    if (typeof cb !== 'function')
      throw new TypeError("Failed to execute 'requestAnimationFrame' on 'Window': The callback provided as parameter 1 is not a function.");
    counts.requested++;
    const id = nextId++;
    if (!batch) {
      const now = performance.now();
      let k = max(lastK + 1, floor(now * 60 / 1000));
      while (T(k) <= now) k++;
      batch = { k, cbs: new Map() };
      setT(runBatch, T(k) - now);
    }
    batch.cbs.set(id, cb);
    return id;
  };
  window.cancelAnimationFrame = function cancelAnimationFrame(id) { if (batch) batch.cbs.delete(id); };

  // ---- CSS animations and transitions: the document's timeline stands still (the wrapper
  // holds it with the DevTools Animation domain); each frame moves every running one a frame
  // on, and when one starts, ends, repeats or goes, the browser renders so its events are
  // delivered before the next frame, as they would be between two real frames.
  let seen = new Set();
  const phase = (t) => t.localTime === null ? -1 : t.localTime < t.delay ? 0
    : t.localTime >= t.delay + t.activeDuration ? 2 : 1;
  function animationsChanged(advanceMs) {
    let changed = false;
    const now = new Set();
    let all;
    try { all = getAnimations.call(document); } catch (e) { return false; }
    for (const anim of all) {
      now.add(anim);
      if (!seen.has(anim)) changed = true;
      if (!advanceMs || anim.playState !== 'running' || anim.timeline !== document.timeline) continue;
      try {
        const effect = anim.effect, before = effect && effect.getComputedTiming();
        anim.currentTime = (anim.currentTime || 0) + advanceMs * anim.playbackRate;
        const after = effect && effect.getComputedTiming();
        if (before && (before.currentIteration !== after.currentIteration || phase(before) !== phase(after))) changed = true;
      } catch (e) { /* a detached effect: nothing to move */ }
    }
    for (const anim of seen) if (!now.has(anim)) { changed = true; break; }
    seen = now;
    return changed;
  }
  const realTimeout = builtins.setTimeout;
  const rendering = () => new Promise((done) => {
    if (!nativeFrame || !realTimeout) return done();
    nativeFrame.call(window, () => done());
    realTimeout.call(window, done, 100);  // a page the browser does not render (hidden) is not waited on
  });
  async function settle(advanceMs) {
    let changed = animationsChanged(advanceMs);
    for (let i = 0; changed && i < CONFIG.maxRenders; i++) {
      await rendering();
      changed = animationsChanged(0);
    }
  }

  // ---- frames of the same origin keep this page's time (others keep their own, held).
  async function children(ms) {
    for (let i = 0; i < window.frames.length; i++) {
      let child = null;
      try { child = window.frames[i].__gameBridge || null; } catch (e) { child = null; }
      if (child) { try { await child.follow(ms); } catch (e) { /* it went meanwhile */ } }
    }
  }

  // ---- a navigation away from this document stops its frames where it began, and hands its
  // time to the next document, with how many frames of the run under way were this one's (the
  // wrapper reads them there when this document was gone before its run could answer).
  let leaving = false, running = null;
  addListener.call(window, 'beforeunload', () => {
    leaving = true;
    const frames = running ? running.j - running.k : 0;
    if (top) { try { sessionStorage.setItem(CONFIG.key, JSON.stringify({ time: Date.now(), frames })); } catch (e) { /* none */ } }
  }, true);
  const stay = () => {
    leaving = false;
    if (top) { try { sessionStorage.removeItem(CONFIG.key); } catch (e) { /* none */ } }
  };

  __LOOK__

  async function run(k, n, wantLook) {
    let done = 0;
    if (clock) {
      running = { k, j: k };
      try {
        for (let j = k + 1; j <= k + n && !leaving; j++) {
          running.j = j;
          nextQuota();
          const ms = max(0, T(j) - clock.performanceNow());
          try { await clock.runFor(ms); } catch (e) { report(e); }
          done++;
          if (leaving) break;  // (nothing more to wait for: the next document is coming)
          await children(ms);
          await settle(CONFIG.frameMs);
        }
      } finally { running = null; }
    }
    return toJson([wantLook ? look() : null, clock ? null : 'no clock in this document', done, leaving]);
  }
  async function follow(ms) {
    if (!clock) return;
    try { await clock.runFor(ms); } catch (e) { report(e); }
    await children(ms);
    await settle(ms);
  }
  function command(name, args) {
    const hook = window.gameBridge;
    const entry = hook && hook.commands && hook.commands[name];
    const fn = typeof entry === 'function' ? entry : entry && entry.run;
    if (typeof fn !== 'function') throw new Error(`the page has no command ${name} now (window.gameBridge.commands)`);
    const value = fn(args);
    if (value && typeof value.then === 'function') {
      value.then(() => {}, (e) => { report(e); });
      return { promise: true };
    }
    return { value: value === undefined ? null : fromJson(toJson(value)) };
  }
  async function render(times) { for (let i = 0; i < times; i++) await rendering(); }
  const dropped = () => ({ console: quota.droppedConsole, errors: quota.droppedErrors, popups: quota.popups });
  const gb = freeze({ run, follow, look, command, stay, render, pictureHash, arrived: () => arrived, dropped,
                      counts: () => ({ ...counts }) });
  defineProperty(window, '__gameBridge', { value: gb, enumerable: false, writable: false, configurable: false });
})();
"""

#: Run frames ``k + 1`` to ``k + n`` (each: the clock to its time, then CSS animations) and look
#: at the page. ``[k, n, look]``; answers ``[look or null, error or null, frames run, whether the
#: page began to navigate away]``, as JSON text (the library's own encoding of a returned object
#: cost 4 ms a look more than the text, which ``run_answer`` parses).
RUN = "([k, n, look]) => window.__gameBridge.run(k, n, look)"


def run_answer(text: Any) -> list[Any]:
    """``RUN``'s answer: ``[look or None, error or None, frames run, leaving]``."""
    answer = json.loads(text) if isinstance(text, str) else None
    if not isinstance(answer, list) or len(answer) != 4:
        raise ValueError(f"the page's script answered {str(text)[:100]!r} to a run")
    return answer
#: Let the browser render ``n`` times (input it delivers with its renderings, such as the
#: wheel, reaches the page meanwhile).
RENDER = "(n) => window.__gameBridge && window.__gameBridge.render(n)"
#: The canvases' pixels in a region of the viewport: ``[x, y, width, height]`` -> a hash, or
#: null when no readable canvas is there.
PICTURE_HASH = "([x, y, w, h]) => window.__gameBridge.pictureHash(x, y, w, h)"
#: What the document before this one handed over (``{time, frames}``: the frames of the run
#: under way that were its own), or null.
ARRIVED = "() => window.__gameBridge ? window.__gameBridge.arrived() : null"
#: A navigation that did not happen (refused, or not a document): the frames go on.
STAY = "() => window.__gameBridge && window.__gameBridge.stay()"
#: Run one of the page's own commands: ``[name, args]`` -> ``{value}`` or ``{promise: true}``.
COMMAND = "([name, args]) => window.__gameBridge.command(name, args)"
#: Whether the clock can be driven directly (the library's clock controller is there).
HAS_CLOCK = "() => !!(globalThis.__pwClock && globalThis.__pwClock.controller && globalThis.__pwClock.controller.runFor)"
TICKS = "() => performance.now()"
