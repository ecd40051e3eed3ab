// A small page of our own with exact answers: a frame counter, a mover that moves one
// pixel per animation frame while ArrowRight is held, Date/performance/setInterval
// clocks that must stand still while paused, a CSS animation, and keys that make the
// page misbehave (D: an alert, E: an uncaught error, W: console.warn, S: a busy loop), and
// commands of its own for the agent (teleport, boom, later).
// Loaded as an ES module, so it only works over http://, as the wrapper serves it.
const d0 = Date.now(), p0 = performance.now();
let frames = 0, x = 0, ticks = 0, lastStamp = null, stampSteps = [];
const held = new Set(), clicks = [];
addEventListener('keydown', (e) => {
  held.add(e.code);
  console.log(`keydown ${e.code} ${e.key}`);
  if (e.code === 'KeyD') alert('hello from the page');
  if (e.code === 'KeyE') setTimeout(() => { throw new Error('boom from a timer'); }, 0);
  if (e.code === 'KeyW') console.warn('a warning');
  if (e.code === 'KeyS' && e.shiftKey) { for (;;) {} }
});
addEventListener('keyup', (e) => held.delete(e.code));
addEventListener('mousedown', (e) => { clicks.push([e.clientX, e.clientY, e.button]); console.log(`mousedown ${e.clientX},${e.clientY} ${e.button}`); });
setInterval(() => { ticks++; }, 100);
function frame(stamp) {
  frames++;
  if (lastStamp !== null) { stampSteps.push(Math.round((stamp - lastStamp) * 1000) / 1000); if (stampSteps.length > 5) stampSteps.shift(); }
  lastStamp = stamp;
  if (held.has('ArrowRight')) x++;
  document.getElementById('t').textContent = `frames ${frames} x ${x}`;
  const g = document.getElementById('c').getContext('2d');
  g.fillStyle = '#000'; g.fillRect(0, 0, 200, 100);
  g.fillStyle = '#f00'; g.fillRect(x % 200, 40, 10, 10);
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
window.gameBridge = {
  commands: {
    teleport: { description: 'Put the mover at x.', args: { x: { type: 'integer', minimum: 0, maximum: 199 } },
                run: ({ x: to }) => { x = to; return { x }; } },
    boom: () => { throw new Error('no such luck'); },
    later: { description: 'Resolves after 100 ms of page time.', run: () => new Promise((done) => setTimeout(done, 100)) },
  },
  state: () => ({ game: {
    frames, x, ticks, clicks: clicks.slice(-3), stampSteps,
    dateMs: Date.now() - d0, perfMs: Math.round(performance.now() - p0),
    bar: Math.round(parseFloat(getComputedStyle(document.getElementById('bar')).width)),
    field: document.getElementById('field').value,
  } }),
};
