"""What the wrapper reads of a page at each look (the JavaScript of ``look()``, run in the
page by ``_scripts``): its title and address, the text a player sees in the viewport in
reading order, the page's whole text, its canvases and its own hook. Every part is capped,
so a page cannot make a look (or an answer) as large as it likes (docs/reliability.md,
"The browser wrapper's page"); the page's own objects are reached through built-ins the
wrapper's script kept before the page ran, so a page that replaces them cannot break or
fake what the wrapper reads."""

from __future__ import annotations

#: ``ui.text``: the visible text, at most this many characters (the rest: ``...``).
UI_TEXT = 600
#: ``browser.text``: the page's whole text, at most this many characters.
PAGE_TEXT = 20_000
#: Text nodes looked at in one look, at most (a page of a million is read in part), and the
#: characters read of them (of one node, at most the page text's cap).
TEXT_NODES = 20_000
TEXT_CHARS = 400_000
#: The title, the address, a command's description: at most this many characters.
TITLE = 300
URL = 2000
DESCRIPTION = 500
#: ``window.gameBridge.state()``'s JSON, and the commands taken from a page.
HOOK_JSON = 65_536
COMMANDS = 64
#: Canvases described, at most.
CANVASES = 16

LIMITS = {"uiText": UI_TEXT, "pageText": PAGE_TEXT, "nodes": TEXT_NODES, "chars": TEXT_CHARS, "title": TITLE,
          "url": URL,
          "description": DESCRIPTION, "hookJson": HOOK_JSON, "commands": COMMANDS, "canvases": CANVASES}

#: Defines ``look()`` inside the wrapper's script (it sees ``CONFIG.look``, ``counts``).
LOOK = r"""
  const L = CONFIG.look;
  const stringify = JSON.stringify, parse = JSON.parse;
  const ownKeys = Reflect.ownKeys, isArray = Array.isArray;
  const sortArray = Array.prototype.sort;
  const round = Math.round, min = Math.min;
  const getter = (proto, name) => { const d = getOwnPropertyDescriptor(proto, name); return d && d.get; };
  const titleOf = getter(Document.prototype, 'title');
  const bodyOf = getter(Document.prototype, 'body');
  const readyOf = getter(Document.prototype, 'readyState');
  const dataOf = getter(CharacterData.prototype, 'data');
  const parentOf = getter(Node.prototype, 'parentElement');
  const tagOf = getter(Element.prototype, 'tagName');
  const contains = Node.prototype.contains;
  const hrefOf = getter(Location.prototype, 'href') || (() => String(location.href));
  const makeWalker = Document.prototype.createTreeWalker;
  const nextNode = TreeWalker.prototype.nextNode;
  const makeRange = Document.prototype.createRange;
  const selectContents = Range.prototype.selectNodeContents;
  const rangeRects = Range.prototype.getClientRects;
  const rangeStart = Range.prototype.setStart, rangeEnd = Range.prototype.setEnd;
  const elementBox = Element.prototype.getBoundingClientRect;
  const checkVisibility = Element.prototype.checkVisibility;
  const queryAll = Document.prototype.querySelectorAll;
  const widthOf = getter(HTMLCanvasElement.prototype, 'width'), heightOf = getter(HTMLCanvasElement.prototype, 'height');
  const replace = String.prototype.replace, slice = String.prototype.slice, trim = String.prototype.trim;
  const SKIP = { SCRIPT: 1, STYLE: 1, NOSCRIPT: 1, TEMPLATE: 1, TITLE: 1 };
  const cut = (text, most) => text.length <= most ? text : apply(slice, text, [0, most]) + '...';

  function texts() {
    // The viewport's text in reading order (lines top to bottom, left to right within one),
    // and the page's text in document order; hidden text in neither.
    const body = apply(bodyOf, document, []);
    if (!body) return { visible: '', visibleLength: 0, page: '', pageLength: 0, partial: false };
    const vw = window.innerWidth, vh = window.innerHeight;
    const walker = apply(makeWalker, document, [body, 4]);
    const range = apply(makeRange, document, []);
    const shown = new Map();
    const seen = [];
    let page = '', pageLength = 0, nodes = 0, chars = 0, lastParent = null, node;
    while ((node = apply(nextNode, walker, [])) !== null) {
      if (++nodes > L.nodes || chars > L.chars) { nodes = L.nodes + 1; break; }
      const parent = apply(parentOf, node, []);
      if (!parent || SKIP[apply(tagOf, parent, [])]) continue;
      let raw = apply(dataOf, node, []);
      const long = raw.length > L.pageText;
      if (long) raw = apply(slice, raw, [0, L.pageText]);
      chars += raw.length;
      const text = apply(trim, apply(replace, raw, [/\s+/g, ' ']), []);
      if (!text) continue;
      let visible = shown.get(parent);
      if (visible === undefined) {
        visible = !checkVisibility || apply(checkVisibility, parent, [{ visibilityProperty: true, opacityProperty: true }]);
        shown.set(parent, visible);
      }
      if (!visible) continue;
      pageLength += text.length + 1;
      const inline = lastParent !== null && (apply(contains, parent, [lastParent]) || apply(contains, lastParent, [parent]));
      if (page.length < L.pageText) page += (page ? (inline ? ' ' : '\n') : '') + text;
      lastParent = parent;
      if (long) {  // (its rectangles: of the part read, one a line, not of megabytes of lines)
        apply(rangeStart, range, [node, 0]);
        apply(rangeEnd, range, [node, L.pageText]);
      } else apply(selectContents, range, [node]);
      const rects = apply(rangeRects, range, []);
      for (let i = 0; i < rects.length; i++) {
        const r = rects[i];
        if (r.width > 0 && r.height > 0 && r.bottom > 0 && r.top < vh && r.right > 0 && r.left < vw) {
          seen[seen.length] = { top: r.top, left: r.left, height: r.height, text };
          break;
        }
      }
    }
    // lines: a text starts a new line when it begins below the middle of the line's first
    apply(sortArray, seen, [(a, b) => a.top - b.top || a.left - b.left]);
    const lines = [];
    let line = null;
    for (const item of seen) {
      if (line === null || item.top >= line.top + line.height / 2) {
        line = { top: item.top, height: item.height, items: [] };
        lines[lines.length] = line;
      }
      line.items[line.items.length] = item;
    }
    let visible = '', visibleLength = 0;
    for (const each of lines) {
      apply(sortArray, each.items, [(a, b) => a.left - b.left]);
      let words = '';
      for (const item of each.items) words += (words ? ' ' : '') + item.text;
      visibleLength += words.length + (visibleLength ? 1 : 0);
      if (visible.length <= L.uiText) visible += (visible ? '\n' : '') + words;
    }
    return { visible: cut(visible, L.uiText), visibleLength, page: cut(page, L.pageText), pageLength,
             partial: nodes > L.nodes };
  }

  function canvases() {
    const found = [];
    const all = apply(queryAll, document, ['canvas']);
    for (let i = 0; i < all.length && found.length < L.canvases; i++) {
      const c = all[i], r = apply(elementBox, c, []);
      found[found.length] = { width: apply(widthOf, c, []), height: apply(heightOf, c, []), x: round(r.left),
                              y: round(r.top), cssWidth: round(r.width), cssHeight: round(r.height) };
    }
    return found;
  }

  function hookState(doc) {
    const hook = window.gameBridge;
    if (!hook || typeof hook !== 'object') return;
    if (typeof hook.state === 'function') {
      try {
        const json = stringify(hook.state());
        if (json === undefined) doc.hookError = 'window.gameBridge.state() returned nothing JSON can hold';
        else if (json.length > L.hookJson) doc.hookError = `window.gameBridge.state() returned ${json.length} characters of JSON, over ${L.hookJson}`;
        else doc.hook = parse(json);
      } catch (e) { doc.hookError = cut(`window.gameBridge.state() failed: ${e && e.message || e}`, L.description); }
    }
    const commands = hook.commands;
    if (!commands || typeof commands !== 'object') return;
    doc.commands = {};
    let taken = 0;
    for (const name of ownKeys(commands)) {
      if (typeof name !== 'string' || name.length > 64 || taken >= L.commands) continue;
      const entry = commands[name];
      const fn = typeof entry === 'function' ? entry : entry && entry.run;
      if (typeof fn !== 'function') continue;
      const described = typeof entry === 'object' ? entry : {};
      let args = {};
      try {
        const json = described.args && typeof described.args === 'object' && !isArray(described.args)
          ? stringify(described.args) : '{}';
        args = json.length <= 16384 ? parse(json) : {};
      } catch (e) { args = {}; }
      doc.commands[name] = { description: cut(String(described.description || ''), L.description), args };
      taken++;
    }
  }

  // ---- the picture's hash in a region of the viewport (CSS pixels): the pixels of the
  // canvases there, at their own resolution (null when no canvas is there, or one cannot be
  // read: the wrapper then hashes a screenshot of the region)
  let scratch = null;
  const drawImage = CanvasRenderingContext2D.prototype.drawImage;
  const getImageData = CanvasRenderingContext2D.prototype.getImageData;
  function pictureHash(rx, ry, rw, rh) {
    const all = apply(queryAll, document, ['canvas']);
    let a = 0x811c9dc5 | 0, b = 0x050c5d1f | 0, found = 0;
    for (let i = 0; i < all.length; i++) {
      const c = all[i], r = apply(elementBox, c, []);
      const cw = apply(widthOf, c, []), ch = apply(heightOf, c, []);
      const left = Math.max(rx, r.left), top = Math.max(ry, r.top);
      const right = Math.min(rx + rw, r.right), bottom = Math.min(ry + rh, r.bottom);
      if (right <= left || bottom <= top || !cw || !ch || !r.width || !r.height) continue;
      const sx = cw / r.width, sy = ch / r.height;
      const x0 = Math.floor((left - r.left) * sx), y0 = Math.floor((top - r.top) * sy);
      const w = Math.max(1, Math.min(cw - x0, Math.ceil((right - left) * sx)));
      const h = Math.max(1, Math.min(ch - y0, Math.ceil((bottom - top) * sy)));
      if (!scratch) scratch = document.createElement('canvas').getContext('2d', { willReadFrequently: true });
      const canvas = scratch.canvas;
      if (canvas.width < w || canvas.height < h) { canvas.width = Math.max(canvas.width, w); canvas.height = Math.max(canvas.height, h); }
      scratch.clearRect(0, 0, w, h);
      let data;
      try {
        apply(drawImage, scratch, [c, x0, y0, w, h, 0, 0, w, h]);
        data = new Uint32Array(apply(getImageData, scratch, [0, 0, w, h]).data.buffer);
      } catch (e) { return null; }  // a canvas another origin drew on: not readable
      a = Imul(a ^ (i + 1), 16777619); b = Imul(b ^ w ^ (h << 16), 2246822519);
      for (let j = 0; j < data.length; j++) { const v = data[j]; a = Imul(a ^ v, 16777619); b = Imul(b ^ v, 2246822519) ^ (b >>> 13); }
      found++;
    }
    if (!found) return null;
    return (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0') + found;
  }

  function look() {
    const text = texts();
    const doc = { title: cut(String(apply(titleOf, document, []) || ''), L.title), url: cut(apply(hrefOf, location, []), L.url),
                  text: text.visible, textLength: text.visibleLength, pageText: text.page,
                  pageTextLength: text.pageLength, textPartial: text.partial,
                  readyState: apply(readyOf, document, []),
                  viewport: { width: window.innerWidth, height: window.innerHeight }, canvases: canvases(),
                  animationFrames: counts.frames, frameCallbacks: counts.callbacks, frameRequests: counts.requested,
                  dropped: dropped() };
    hookState(doc);
    return doc;
  }
"""
