"""The replay as one self-contained HTML page (no network, no script, inline styles, screenshots
as ``data:`` URIs), showing only the recording's own copies and the replaying bridge's files."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Iterable, Iterator

from .files import MAX_FILE_BYTES, read_in_folder, read_inside
from .reader import Call
from .compare import IgnoreRules
from .replay import DIVERGED, FAILED, NOT_RUN, SAME, SKIPPED, ReplayResult, StepOutcome

MAX_IMAGE_BYTES = MAX_FILE_BYTES
MAX_JSON_CHARS = 200_000
#: An answer with more members than this is shown as plain JSON, not marked member by member.
MAX_MARKED_MEMBERS = 5_000
#: After this many characters of steps, later steps are shown without their answers.
MAX_STEPS_CHARS = 48 * 1024 * 1024
_STATUS_TEXT = {SAME: "same", DIVERGED: "DIVERGED", SKIPPED: "not replayed", NOT_RUN: "not run", FAILED: "FAILED"}

CSS = """
:root { --ok:#2e7d32; --bad:#c62828; --mute:#757575; --line:#e0e0e0; --bg:#fafafa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #212121; background: #fff; }
header { padding: 16px 24px; border-bottom: 1px solid var(--line); }
h1 { font-size: 20px; margin: 0 0 8px; }
.verdict { display: inline-block; padding: 4px 12px; border-radius: 4px; color: #fff; font-weight: 700; letter-spacing: .04em; }
.verdict.same { background: var(--ok); } .verdict.diverged, .verdict.failed { background: var(--bad); }
.verdict.updated { background: #1565c0; }
.meta { color: var(--mute); margin: 8px 0 0; } .meta code { color: #212121; }
table.ids { border-collapse: collapse; margin-top: 10px; }
table.ids td, table.ids th { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
nav.strip { display: flex; flex-wrap: wrap; gap: 3px; padding: 10px 24px; border-bottom: 1px solid var(--line); background: var(--bg); }
nav.strip a { display: block; width: 18px; height: 18px; border-radius: 3px; font-size: 9px; color: #fff; text-align: center; line-height: 18px; text-decoration: none; }
.s-same { background: var(--ok); } .s-diverged, .s-failed { background: var(--bad); } .s-skipped { background: #bdbdbd; } .s-not-run { background: #eeeeee; color: #9e9e9e !important; }
ol.timeline { list-style: none; margin: 0; padding: 12px 24px 48px; }
li.step { border: 1px solid var(--line); border-left: 6px solid var(--line); border-radius: 4px; margin: 10px 0; padding: 8px 12px; }
li.step.same { border-left-color: var(--ok); } li.step.skipped, li.step.not-run { border-left-color: #bdbdbd; color: #616161; }
li.step.diverged, li.step.failed { border: 2px solid var(--bad); border-left: 8px solid var(--bad); background: #fff5f5; }
.head { display: flex; gap: 12px; align-items: baseline; flex-wrap: wrap; }
.n { font-weight: 700; min-width: 2.5em; } .t { color: var(--mute); font-variant-numeric: tabular-nums; }
.status { margin-left: auto; font-weight: 700; } .same .status { color: var(--ok); } .diverged .status, .failed .status { color: var(--bad); }
pre { margin: 4px 0; padding: 6px 8px; background: var(--bg); border: 1px solid var(--line); border-radius: 3px; overflow-x: auto; font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre-wrap; word-break: break-word; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 10px; margin-top: 6px; }
.side h4 { margin: 4px 0; font-size: 12px; text-transform: uppercase; color: var(--mute); }
mark.d { background: #ffcdd2; outline: 1px solid var(--bad); color: inherit; }
table.diff { border-collapse: collapse; margin: 6px 0; width: 100%; }
table.diff th, table.diff td { border: 1px solid #ef9a9a; padding: 3px 6px; text-align: left; vertical-align: top; font: 12px/1.4 ui-monospace, monospace; word-break: break-word; }
table.diff th { background: #ffebee; font-family: system-ui, sans-serif; }
img.shot { max-width: 100%; border: 1px solid var(--line); image-rendering: pixelated; }
.error { color: var(--bad); font-weight: 600; white-space: pre-wrap; }
p.note { white-space: pre-wrap; }
.ig { color: #9e9e9e; }
section.first { margin: 8px 0; padding: 8px 12px; border: 2px solid var(--bad); border-radius: 4px; background: #fff5f5; color: #212121; max-width: 1100px; }
section.first a { color: var(--bad); font-weight: 700; }
details > summary { cursor: pointer; color: var(--mute); margin: 4px 0; }
pre.screen { display: inline-block; margin: 0; padding: 6px 8px; border-radius: 3px; background: #263238; color: #eceff1; font: 14px/1.3 ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace; white-space: pre; overflow-x: auto; max-width: 100%; }
pre.screen.d { outline: 3px solid var(--bad); }
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=False, default=str)


def json_html(value: Any, marked: set[str], path: tuple[str, ...] = (), indent: int = 0,
              ignored: IgnoreRules | None = None) -> str:
    """Pretty-printed JSON as HTML: each value at a path in ``marked`` wrapped in
    ``<mark>``, each member the ignore rules leave out of the comparison dimmed."""
    pad = "  " * indent
    if isinstance(value, (Mapping, list)) and value:
        pairs = list(value.items()) if isinstance(value, Mapping) else list(enumerate(value))
        items = []
        for key, item in pairs:
            child = path + (str(key),)
            inner = json_html(item, marked, child, indent + 1, ignored).lstrip()
            label = f"{_e(_dump(str(key)))}: " if isinstance(value, Mapping) else ""
            rendered = f"{pad}  {label}{inner}"
            if ".".join(child) in marked and isinstance(item, (Mapping, list)) and item:
                rendered = f'<mark class="d">{rendered}</mark>'
            elif ignored is not None and ignored.ignores(child):
                rendered = f'<span class="ig" title="not compared">{rendered}</span>'
            items.append(rendered)
        open_, close = ("{", "}") if isinstance(value, Mapping) else ("[", "]")
        return pad + open_ + "\n" + ",\n".join(items) + f"\n{pad}{close}"
    body = _e(_dump(value))
    if ".".join(path) in marked:
        body = f'<mark class="d">{body}</mark>'
    return pad + body


def _image_uri(data: bytes | None) -> str | None:
    if data is None:
        return None
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        mime = "image/png"
    elif data.startswith(b"\xff\xd8\xff"):
        mime = "image/jpeg"
    else:
        return None
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def recorded_image(call: Call, trace_dir: Path) -> tuple[str, bytes | None] | None:
    """``(name, bytes)`` of the screenshot a recorded call kept: only its ``copy``, and only
    from inside the trace's own folder (:func:`.files.read_inside`); None when it names none."""
    shot = call.screenshot
    if not shot:
        return None
    copy, original = shot.get("copy"), shot.get("file")
    name = copy if isinstance(copy, str) and copy else original if isinstance(original, str) else None
    if not name:
        return None
    return name, read_inside(trace_dir, copy, max_bytes=MAX_IMAGE_BYTES)


def replayed_image(step: StepOutcome, folder: Path | None) -> tuple[str, bytes | None] | None:
    """``(name, bytes)`` of the screenshot a replayed call saved: only a file in the
    replaying bridge's own screenshot folder (a game's answer may name any file)."""
    answer = step.answer
    if isinstance(answer, Mapping) and isinstance(answer.get("file"), str) and answer.get("format") in ("png", "jpeg"):
        return answer["file"], read_in_folder(folder, answer["file"], max_bytes=MAX_IMAGE_BYTES)
    return None


def _shot_html(shot: tuple[str, bytes | None] | None, label: str) -> str:
    if shot is None:
        return ""
    uri = _image_uri(shot[1])
    if uri is None:
        return f'<p class="meta">{_e(label)} screenshot {_e(shot[0])} is not available.</p>'
    return f'<img class="shot" alt="{_e(label)} screenshot" src="{uri}">'


def _members_within(value: Any, limit: int) -> bool:
    """Whether ``value`` has at most ``limit`` members in all (stops counting past it)."""
    stack, count = [value], 0
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            count += len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            count += len(item)
            stack.extend(item)
        if count > limit:
            return False
    return True


def _plain(text: str) -> str:
    """JSON text shown as it is, cut at MAX_JSON_CHARS with a word on how much is left out."""
    if len(text) <= MAX_JSON_CHARS:
        return _e(text)
    return _e(text[:MAX_JSON_CHARS]) + f"… ({len(text) - MAX_JSON_CHARS:,} more characters left out)"


def _side(title: str, value: Any, marked: set[str], rules: IgnoreRules | None) -> str:
    """One answer, pretty-printed with its differences marked when it is small enough
    (MAX_JSON_CHARS of JSON, MAX_MARKED_MEMBERS members); else its JSON as plain text,
    cut: the cost of a side is bounded, whatever the answer."""
    if value is None:
        text = "(nothing)"
    else:
        dumped = _dump(value)
        if len(dumped) <= MAX_JSON_CHARS and _members_within(value, MAX_MARKED_MEMBERS):
            text = json_html(value, marked, ignored=rules)
        else:
            text = _plain(dumped)
    return f'<div class="side"><h4>{_e(title)}</h4><pre>{text}</pre></div>'


#: Where an answer carries the game's text picture of its screen: a command's ``text``, or
#: ``ui.text`` of a whole state.
TEXT_PATHS = (("text",), ("ui", "text"))


def text_picture(value: Any) -> tuple[str, str] | None:
    """``(path, text)`` of the text picture an answer carries (``ui.text``, which a
    command's answer calls ``text``), or None."""
    for path in TEXT_PATHS:
        item = value
        for key in path:
            item = item.get(key) if isinstance(item, Mapping) else None
        if isinstance(item, str) and item:
            return ".".join(path), item
    return None


def _screen_html(value: Any, marked: set[str]) -> str:
    """The text picture drawn as what it is: monospace, every line kept (escaped, cut at
    MAX_JSON_CHARS); outlined when the comparison marked it."""
    found = text_picture(value)
    if found is None:
        return ""
    path, text = found
    shown = text if len(text) <= MAX_JSON_CHARS else text[:MAX_JSON_CHARS] + "…"
    changed = " d" if path in marked else ""
    return f'<pre class="screen{changed}" title="{_e(path)}">{_e(shown)}</pre>'


def _recorded_value(call: Call) -> Any:
    if call.error is not None:
        return {"error": call.error}
    if "answer" in call.record:
        return call.record["answer"]
    return call.record.get("answerSummary")


def _diff_table(step: StepOutcome) -> str:
    rows = "".join(f"<tr><td>{_e(d.path or '(whole answer)')}</td><td>{_e(d.recorded_text())}</td>"
                   f"<td>{_e(d.replayed_text())}</td></tr>" for d in step.differences)
    return f'<table class="diff"><tr><th>path</th><th>recorded</th><th>replayed</th></tr>{rows}</table>'


def _step_html(step: StepOutcome, t0: float | None, trace_dir: Path, shots_dir: Path | None,
               rules: IgnoreRules, *, brief: bool = False) -> str:
    call = step.call
    status = step.status
    offset = ""
    t = call.record.get("t")
    if isinstance(t, (int, float)) and t0 is not None:
        offset = f"+{t - t0:.3f} s"
    port = call.port if step.replay_port in (None, call.port) else f"{call.port} → {step.replay_port}"
    head = (f'<div class="head"><span class="n">#{call.step}</span><span class="t">{_e(offset)}</span>'
            f'<code>{_e(call.name or call.tool)}</code><span class="meta">{_e(call.tool)}, port {_e(port)}</span>'
            f'<span class="status">{_e(_STATUS_TEXT.get(status, status))}</span></div>')
    parts = [head, f'<pre class="args">{_plain(_dump(call.arguments))}</pre>']
    parts += [f'<pre class="args">{_e(key)} {_e(_dump(value))}</pre>' for key, value in call.options.items()]
    marked_rec = {d.path for d in step.differences if d.kind != "added"}
    marked_rep = {d.path for d in step.differences if d.kind != "missing"}
    if step.differences:
        parts.append(_diff_table(step))
    if status == FAILED and step.error is not None:
        parts.append(f'<p class="error">{_e(step.error.get("error"))}: {_e(step.error.get("message"))}</p>')
    replayed = status in (SAME, DIVERGED, FAILED)
    if brief:
        parts.append('<p class="meta">answers left out: the report already holds '
                     f'{MAX_STEPS_CHARS // (1024 * 1024)} MB of steps</p>')
        return f'<li class="step {status}" id="step-{call.step}">' + "".join(parts) + "</li>"
    if replayed:
        sides = ('<div class="sides">'
                 + _side("recorded", _recorded_value(call), marked_rec, rules)
                 + _side("replayed", step.replayed_view, marked_rep, rules)
                 + "</div>")
        if status == SAME:
            sides = f"<details><summary>recorded and replayed answers (they match)</summary>{sides}</details>"
    else:
        why = "not replayed: a session call" if status == SKIPPED else "not run"
        sides = (f"<details><summary>recorded answer ({why})</summary><div class=\"sides\">"
                 + _side("recorded", _recorded_value(call), set(), None) + "</div></details>")
    parts.append(sides)
    screens = [_screen_html(_recorded_value(call), marked_rec),
               _screen_html(step.replayed_view, marked_rep) if replayed else ""]
    if any(screens):  # the game's text picture stays in view too, drawn as text
        parts.append('<div class="sides screens">' + "".join(
            f'<div class="side"><h4>{label} screen (text)</h4>{html_}</div>' if html_ else '<div class="side"></div>'
            for label, html_ in zip(("recorded", "replayed"), screens)) + "</div>")
    shots = [_shot_html(recorded_image(call, trace_dir), "recorded"),
             _shot_html(replayed_image(step, shots_dir), "replayed") if replayed else ""]
    if any(shots):  # screenshots stay in view, whatever is folded
        parts.append('<div class="sides shots">' + "".join(
            f'<div class="side"><h4>{label} screenshot</h4>{html_}</div>' if html_ else '<div class="side"></div>'
            for label, html_ in zip(("recorded", "replayed"), shots)) + "</div>")
    return f'<li class="step {status}" id="step-{call.step}">' + "".join(parts) + "</li>"


def _verdict(result: ReplayResult, update: bool) -> tuple[str, str]:
    if result.failure is not None:
        return "failed", "FAILED"
    if result.divergences:
        return ("updated", "UPDATED") if update else ("diverged", "DIVERGED")
    return "same", "SAME"


def _or_dash(value: Any) -> Any:
    return "—" if value is None else value


def _yes_no(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else "unknown"


def _identity_rows(rows: Iterable[tuple[str, Mapping[str, Any]]]) -> str:
    cells = "".join(f"<tr><th>{_e(label)}</th><td>{_e(_or_dash(ident.get('name')))}</td>"
                    f"<td>{_e(_or_dash(ident.get('version')))}</td><td>{_e(_or_dash(ident.get('cwd')))}</td><td>{_e(_yes_no(ident.get('paused')))}</td></tr>" for label, ident in rows)
    return ('<table class="ids"><tr><th></th><th>game</th><th>version</th><th>cwd</th><th>started paused</th></tr>'
            f"{cells}</table>")


def render_report(result: ReplayResult, *, current: Mapping[int, Mapping[str, Any]] | None = None,
                  update: bool = False) -> str:
    """The report page for one replay; ``current`` is the replayed instances' identity by port."""
    return "".join(report_parts(result, current=current, update=update))


def report_parts(result: ReplayResult, *, current: Mapping[int, Mapping[str, Any]] | None = None,
                 update: bool = False) -> Iterator[str]:
    """The report page in pieces, a step at a time (what :func:`write_report` writes as
    they come, so no more than one step's HTML is held)."""
    trace = result.trace
    trace_dir = trace.path.parent
    css_class, word = _verdict(result, update)
    first = result.first_divergence or result.failed_step
    summary = "every replayed answer matches the recording"
    if first is not None:
        what = "failed" if first.status == FAILED else "changed" if update else "diverged"
        summary = (f'<section class="first"><a href="#step-{first.call.step}">Step {first.call.step}</a> {what}: '
                   f'<code>{_e(first.call.label())}</code>'
                   f'{_diff_table(first) if first.differences else ""}</section>')
    times = [float(t) for t in (c.record.get("t") for c in trace.calls) if isinstance(t, (int, float))]
    t0 = min(times) if times else None
    idents: list[tuple[str, Mapping[str, Any]]] = []
    for port in trace.ports() or [c.port for c in trace.calls if c.port is not None][:1]:
        idents.append((f"recorded (port {port})", trace.identity(port)))
    for port, ident in (current or {}).items():
        idents.append((f"replayed (port {port})", ident))
    head = trace.header
    notes = "".join(f'<p class="meta note">note: {_e(n)}</p>' for n in result.notes)
    strip = "".join(f'<a class="s-{s.status}" href="#step-{s.call.step}" title="step {s.call.step}: '
                    f'{_e(s.call.label())} ({_e(_STATUS_TEXT.get(s.status, s.status))})">{s.call.step}</a>'
                    for s in result.steps)
    failure = ""
    if result.failure is not None:
        failure = f'<p class="error">{_e(result.failure.render())}</p>'
    yield f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(word)}: replay of {_e(trace.path.name)}</title>
<style>{CSS}</style></head>
<body>
<header>
<h1>Replay of <code>{_e(trace.path.name)}</code> <span class="verdict {css_class}" id="verdict">{_e(word)}</span></h1>
<div class="meta">{summary}</div>
{failure}
<p class="meta">Recorded {_e(head.get('created'))} by game-bridge-mcp {_e(head.get('bridge'))} ({_e(head.get('recorder'))});
{len(trace.calls)} calls, {len(trace.replayed_calls)} replayed.
Ignored paths: <code>{_e(', '.join(result.rules.patterns))}</code></p>
{notes}
{_identity_rows(idents)}
</header>
<nav class="strip" aria-label="steps">{strip}</nav>
<ol class="timeline">
"""
    size = 0
    for s in result.steps:
        step = _step_html(s, t0, trace_dir, result.screenshots, result.rules, brief=size > MAX_STEPS_CHARS)
        size += len(step)
        yield step + "\n"
    yield """</ol>
</body></html>
"""


def write_report(path: str | Path, result: ReplayResult, **kwargs: Any) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for part in report_parts(result, **kwargs):
            handle.write(part)
    tmp.replace(target)
    return target
