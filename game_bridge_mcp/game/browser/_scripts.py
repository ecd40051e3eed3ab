"""The JavaScript the wrapper puts into the page: animation frames on a 1/60 s grid, and a
look at what the page shows (docs/design.md, "The browser wrapper")."""

from __future__ import annotations

#: Milliseconds of page time per frame, and the grid (the same integer formula in JS).
FRAME_MS = 1000.0 / 60.0


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


INIT = r"""
(() => {
  if (window.__gameBridge) return;
  const T = (k) => Math.floor((1000 * k + 59) / 60);
  const setT = window.setTimeout;
  const gb = { frames: 0, callbacks: 0, requested: 0, lastK: -1 };
  Object.defineProperty(window, '__gameBridge', { value: gb, enumerable: false });
  let nextId = 1, batch = null;
  const report = (e) => {
    if (typeof reportError === 'function') reportError(e); else setT(() => { throw e; }, 0);
  };
  function runBatch() {
    const b = batch; batch = null; gb.lastK = b.k; gb.frames++;
    const stamp = b.k * 1000 / 60;
    for (const cb of b.cbs.values()) {
      gb.callbacks++;
      try { cb(stamp); } catch (e) { report(e); }
    }
  }
  window.requestAnimationFrame = function requestAnimationFrame(cb) {
    if (typeof cb !== 'function')
      throw new TypeError("Failed to execute 'requestAnimationFrame' on 'Window': The callback provided as parameter 1 is not a function.");
    gb.requested++;
    const id = nextId++;
    if (!batch) {
      const now = performance.now();
      let k = Math.max(gb.lastK + 1, Math.floor(now * 60 / 1000));
      while (T(k) <= now) k++;
      batch = { k, cbs: new Map() };
      setT(runBatch, T(k) - now);
    }
    batch.cbs.set(id, cb);
    return id;
  };
  window.cancelAnimationFrame = function cancelAnimationFrame(id) { if (batch) batch.cbs.delete(id); };
  gb.snapshot = (maxText) => {
    let text = '';
    try { text = document.body ? document.body.innerText || '' : ''; } catch (e) { text = ''; }
    const canvases = [];
    for (const c of Array.from(document.querySelectorAll('canvas')).slice(0, 16)) {
      const r = c.getBoundingClientRect();
      canvases.push({ width: c.width, height: c.height, x: Math.round(r.left), y: Math.round(r.top),
                      cssWidth: Math.round(r.width), cssHeight: Math.round(r.height) });
    }
    const doc = { title: document.title || '', url: location.href, text: text.slice(0, maxText),
                  textLength: text.length, readyState: document.readyState,
                  viewport: { width: window.innerWidth, height: window.innerHeight }, canvases,
                  animationFrames: gb.frames, frameCallbacks: gb.callbacks, frameRequests: gb.requested };
    const hook = window.gameBridge;
    if (hook && typeof hook === 'object' && typeof hook.state === 'function') {
      try {
        const json = JSON.stringify(hook.state());
        if (json === undefined) doc.hookError = 'window.gameBridge.state() returned nothing JSON can hold';
        else if (json.length > 65536) doc.hookError = `window.gameBridge.state() returned ${json.length} characters of JSON, over 65536`;
        else doc.hook = JSON.parse(json);
      } catch (e) { doc.hookError = `window.gameBridge.state() failed: ${e && e.message || e}`; }
    }
    if (hook && typeof hook === 'object' && hook.commands && typeof hook.commands === 'object') {
      doc.commands = {};
      for (const [name, entry] of Object.entries(hook.commands).slice(0, 64)) {
        const fn = typeof entry === 'function' ? entry : entry && entry.run;
        if (typeof fn !== 'function') continue;
        const described = typeof entry === 'object' ? entry : {};
        doc.commands[name] = { description: String(described.description || ''),
                               args: described.args && typeof described.args === 'object' ? described.args : {} };
      }
    }
    return doc;
  };
  gb.command = (name, args) => {
    const entry = window.gameBridge && window.gameBridge.commands && window.gameBridge.commands[name];
    const fn = typeof entry === 'function' ? entry : entry && entry.run;
    if (typeof fn !== 'function') throw new Error(`the page has no command ${name} now (window.gameBridge.commands)`);
    const value = fn(args);
    if (value && typeof value.then === 'function') {
      value.then(() => {}, (e) => { if (typeof reportError === 'function') reportError(e); });
      return { promise: true };
    }
    return { value: value === undefined ? null : JSON.parse(JSON.stringify(value)) };
  };
})();
"""

#: Run the clock to ``ms`` of page time further and look at the page (one round trip).
#: ``[ms, maxText, look]``; answers ``[snapshot or null, clock error or null]``.
RUN = r"""
async ([ms, maxText, look]) => {
  const clock = globalThis.__pwClock && globalThis.__pwClock.controller;
  let error = null;
  if (ms > 0) {
    if (!clock) return [null, 'no clock in this document'];
    try { await clock.runFor(ms); } catch (e) {
      if (typeof reportError === 'function') reportError(e);
    }
  }
  const gb = window.__gameBridge;
  return [look && gb ? gb.snapshot(maxText) : null, error];
}
"""

#: Run one of the page's own commands: ``[name, args]`` -> ``{value}`` or ``{promise: true}``.
COMMAND = "([name, args]) => window.__gameBridge.command(name, args)"
#: Whether the clock can be driven directly (without one init script per step).
HAS_CLOCK = "() => !!(globalThis.__pwClock && globalThis.__pwClock.controller && globalThis.__pwClock.controller.runFor)"
TICKS = "() => performance.now()"
