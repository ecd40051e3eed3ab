"""``check``: the extensions a game advertises in ``/health`` ``features`` (results, after,
view, input), each tried with the game's harmless command; events, clock and screenshot have
their own modules."""

from __future__ import annotations

import time
from typing import Any

from ..contract import (AFTER_FEATURE, DESCRIPTION_CHARS, DIGEST_KEEPS, FEATURES, INPUT_ARGS, MAX_HOLD_MS, RESULTS,
                        RESULTS_KEPT, UI_TEXT_CHARS)
from .base import FAIL, PASS, SKIP, WARN, CheckSession, is_int, show_value

KNOWN_FEATURES = FEATURES
#: The keys view=digest keeps (besides the scalar fields inside ``game``).
DIGEST_KEYS = DIGEST_KEEPS
#: waitMs for the checks that expect a game to hold its answer for all of it.
HOLD_MS = 400
#: waitMs for an id already done (the answer must not wait for it).
DONE_WAIT_MS = 2000


def is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


class FeatureChecks(CheckSession):
    """Reading ``features``, and the results, after, view and input checks."""

    def read_features(self) -> list[str]:
        """The advertised feature names (reported); [] for none or an unusable list."""
        raw = self.health_doc.get("features")
        if raw is None:
            self.report(PASS, "features: none advertised (the contract's floor; extensions are optional)")
            return []
        if not isinstance(raw, list) or not all(isinstance(name, str) for name in raw):
            self.report(FAIL, f"/health features is not a list of strings: {show_value(raw)}",
                        "Advertise extensions as \"features\": [\"results\", \"after\", ...]; a bridge ignores "
                        "anything else, so none of them will be used.")
            return []
        known = [name for name in KNOWN_FEATURES if name in raw]
        unknown = [name for name in raw if name not in KNOWN_FEATURES]
        self.report(PASS, "features: " + (", ".join(known) if known else "none known"),
                    f"Names no bridge knows (ignored): {', '.join(unknown)}." if unknown else "")
        return known

    def _needs_harmless(self, feature: str) -> tuple[str, dict[str, str]] | None:
        harmless = self.harmless()
        if harmless is None:
            self.report(SKIP, f"{feature}: not checked: no harmless command is known",
                        "The game lists no 'noop'. Run again with --command NAME naming one safe to send often.")
        return harmless

    # ------------------------------------------------------------------ results
    def check_results(self) -> None:
        harmless = self._needs_harmless(RESULTS)
        if harmless is None:
            return
        cmd, args = harmless
        count = RESULTS_KEPT + 1 if cmd == "noop" else 1
        ids: list[int] = []
        for _ in range(count):
            command_id, problem = self.send(cmd, args)
            if command_id is None:
                self.report(FAIL, f"results: {problem}")
                return
            ids.append(command_id)
        snap, problem = self.completed(ids[-1])
        if snap is None:
            self.report(FAIL, f"results: {problem}")
            return
        entries = snap.get("commandResults")
        if not isinstance(entries, list):
            self.report(FAIL, "results: /state has no commandResults list" if entries is None else
                        f"results: commandResults is a JSON {type(entries).__name__}, not a list",
                        "With results advertised, /state carries commandResults: [{id, ok, error?, result?}, ...], "
                        "oldest first. The bridge reads a missing entry as 'applied'.")
            return
        bad = [show_value(e, 80) for e in entries if not _good_entry(e)]
        if bad:
            self.report(FAIL, f"results: {len(bad)} commandResults entr{'y has' if len(bad) == 1 else 'ies have'} "
                              "the wrong types", "Each is {\"id\": int, \"ok\": bool, \"error\": str (when ok is "
                              "false), \"result\": any (optional)}. For example: " + "; ".join(bad[:3]))
            return
        seen = [int(e["id"]) for e in entries]
        if seen != sorted(seen):
            self.report(FAIL, f"results: commandResults is not oldest first (ids {show_value(seen, 80)})")
            return
        by_id = {int(e["id"]): e for e in entries}
        if ids[-1] not in by_id:
            self.wait_frames(2)
            later, _ = self.read("/state")
            appeared = isinstance(later, dict) and isinstance(later.get("commandResults"), list) and any(
                isinstance(e, dict) and e.get("id") == ids[-1] for e in later["commandResults"])
            self.report(FAIL, f"results: completedCommandId reached {ids[-1]} but commandResults has no entry for it",
                        "It appeared in a later snapshot: publish it in the same one." if appeared else
                        "An entry must be present from the first snapshot in which completedCommandId reaches its id.")
            return
        kept = sum(1 for i in ids if i in by_id)
        if count > 1 and kept < min(count, RESULTS_KEPT):
            self.report(FAIL, f"results: commandResults keeps only {kept} of the last {count} commands",
                        f"Keep at least the last {RESULTS_KEPT}: a bridge confirming a command that several others "
                        "followed must still find its outcome.")
            return
        mine = by_id[ids[-1]]
        if mine["ok"] is not True:
            self.report(WARN, f"results: '{cmd}' was refused: {show_value(mine.get('error'), 100)}",
                        "The harmless command should succeed; choose another with --command.")
            return
        self.report(PASS, f"results: an entry for each of the {count} '{cmd}' command{'s' if count > 1 else ''}, "
                          f"in the snapshot where it completed ({len(entries)} kept, types right)")

    # ------------------------------------------------------------------ after
    def _timed(self, path: str, timeout_s: float) -> tuple[dict[str, Any] | None, str, float]:
        started = time.monotonic()
        doc, problem = self.read(path, timeout_s=timeout_s)
        return doc, problem, (time.monotonic() - started) * 1000

    def check_after(self) -> None:
        harmless = self._needs_harmless(AFTER_FEATURE)
        if harmless is None:
            return
        baseline, problem, plain_ms = self._timed("/state", self.timeout_s)
        if baseline is None or not is_int(baseline.get("completedCommandId")):
            self.report(FAIL, "after: cannot be checked: /state has no completedCommandId", problem)
            return
        failures = 0
        far = int(baseline["completedCommandId"]) + 1_000_000
        for endpoint in ("/state", "/health"):
            doc, problem, ms = self._timed(f"{endpoint}?after={far}&waitMs={HOLD_MS}", self.timeout_s + HOLD_MS / 1000)
            if doc is None:
                self.report(FAIL, f"after: {problem}")
                failures += 1
            elif ms < HOLD_MS * 0.75:
                self.report(FAIL, f"after: {endpoint}?after={far}&waitMs={HOLD_MS} answered at once ({ms:.0f} ms)",
                            "With after advertised the game holds the answer until completedCommandId >= after or "
                            "waitMs have passed; the bridge would spin on it instead of waiting.")
                failures += 1
            elif ms > HOLD_MS + 1000 + plain_ms:
                self.report(FAIL, f"after: {endpoint}?after={far}&waitMs={HOLD_MS} held for {ms:.0f} ms",
                            "Answer when waitMs have passed, even if the command is not done.")
                failures += 1
        cmd, args = harmless
        command_id, problem = self.send(cmd, args)
        if command_id is None:
            self.report(FAIL, f"after: {problem}")
            return
        wait_ms = min(MAX_HOLD_MS, int(self.timeout_s * 1000))
        doc, problem, ms = self._timed(f"/state?after={command_id}&waitMs={wait_ms}", self.timeout_s + wait_ms / 1000)
        done = doc.get("completedCommandId") if doc is not None else None
        if doc is None:
            self.report(FAIL, f"after: {problem}")
            return
        if not (is_int(done) and done >= command_id):
            self.report(FAIL, f"after: /state?after={command_id} came back after {ms:.0f} ms with completedCommandId "
                              f"{show_value(done)}", "Hold it until the command is applied (or waitMs pass).")
            return
        held_ms = ms
        for endpoint in ("/state", "/health"):
            doc, problem, ms = self._timed(f"{endpoint}?after={command_id}&waitMs={DONE_WAIT_MS}",
                                           self.timeout_s + DONE_WAIT_MS / 1000)
            if doc is None or ms > plain_ms + DONE_WAIT_MS / 2:
                self.report(FAIL, f"after: {problem}" if doc is None else
                            f"after: {endpoint}?after={command_id}&waitMs={DONE_WAIT_MS} (already done) was held "
                            f"{ms:.0f} ms", "" if doc is None else "A command already applied is answered at once.")
                failures += 1
                break
        if not failures:
            self.report(PASS, f"after: /state and /health hold until the command is applied ({held_ms:.0f} ms for "
                              f"'{cmd}'), answer at once when it already is, and give up after waitMs")

    # ------------------------------------------------------------------ view
    def check_view(self) -> None:
        full, problem = self.read("/state")
        digest, problem2 = self.read("/state?view=digest")
        if full is None or digest is None:
            self.report(FAIL, f"view: {problem or problem2}")
            return
        lost = [key for key in DIGEST_KEYS if key in full and key not in digest]
        game, small = full.get("game"), digest.get("game")
        scalars = [k for k, v in game.items() if is_scalar(v)] if isinstance(game, dict) else []
        if isinstance(game, dict) and not isinstance(small, dict):
            lost.append("game")
        else:
            lost += [f"game.{k}" for k in scalars if isinstance(small, dict) and k not in small]
        if lost:
            self.report(FAIL, f"view: /state?view=digest leaves out {', '.join(lost[:8])}",
                        "It may drop everything except frame, simFrame, completedCommandId, paused, ui, events, "
                        "commandResults and the scalar fields of game, and must keep those: the bridge builds "
                        "its digest (and confirms commands) from this answer.")
            return
        extra = [key for key in digest if key not in DIGEST_KEYS and key != "game"]
        nested = [f"game.{k}" for k, v in small.items() if not is_scalar(v)] if isinstance(small, dict) else []
        full_bytes, digest_bytes = len(show_value(full, 1 << 30)), len(show_value(digest, 1 << 30))
        if extra or nested:
            self.report(WARN, f"view: /state?view=digest still carries {', '.join((extra + nested)[:8])}",
                        "Allowed, but leaving them out is what makes view worth advertising "
                        f"({digest_bytes:,} bytes against {full_bytes:,} for the full state).")
            return
        self.report(PASS, f"view: /state?view=digest keeps only the digest fields ({digest_bytes:,} bytes against "
                          f"{full_bytes:,})")

    # ------------------------------------------------------------------ conventions
    def check_conventions(self) -> None:
        """game.description and ui.text: not features, but each has a size the bridge shows.
        (Bad enum/minimum/maximum are reported by the manifest reader in check_tools.)"""
        problems: list[str] = []
        tools, _ = self.read("/tools", max_bytes=8 * 1024 * 1024)
        game = tools.get("game") if tools is not None else None
        description = game.get("description") if isinstance(game, dict) else None
        if description is not None and not isinstance(description, str):
            problems.append(f"/tools game.description is {show_value(description, 60)}, not a string")
        elif isinstance(description, str) and len(description) > DESCRIPTION_CHARS:
            problems.append(f"/tools game.description is {len(description):,} characters; list_toolsets shows about "
                            f"{DESCRIPTION_CHARS}")
        state, _ = self.read("/state")
        ui = state.get("ui") if state is not None else None
        text = ui.get("text") if isinstance(ui, dict) else None
        if text is not None and not isinstance(text, str):
            problems.append(f"/state ui.text is {show_value(text, 60)}, not a string")
        elif isinstance(text, str) and len(text) > UI_TEXT_CHARS:
            problems.append(f"/state ui.text is {len(text):,} characters; the digest carries about {UI_TEXT_CHARS}")
        present = [label for label, there in (("game.description", isinstance(description, str)),
                                              ("ui.text", isinstance(text, str))) if there]
        if problems:
            self.report(WARN, f"conventions: {problems[0]}", *problems[1:5],
                        "The bridge caps or ignores what does not fit; say it shorter.")
        elif present:
            self.report(PASS, f"conventions: {' and '.join(present)} fit what the bridge shows")

    # ------------------------------------------------------------------ input
    def check_input(self) -> None:
        if self.manifest is None:
            missing = [name for name in INPUT_ARGS if name not in self.known_commands]
            self.report(FAIL if missing else WARN,
                        f"input: the game does not know {', '.join(missing)}" if missing else
                        "input: argument names not checked: the game publishes no /tools",
                        "Publish key, mouse and text (with their arguments) in GET /tools.")
            return
        by_command = {tool.command: tool for tool in self.manifest.tools()}
        problems: list[str] = []
        for name, wanted in INPUT_ARGS.items():
            tool = by_command.get(name)
            if tool is None:
                problems.append(f"no '{name}' command in /tools")
                continue
            props = tool.input_schema.get("properties")
            have = set(props) if isinstance(props, dict) else set()
            lacking = [arg for arg in wanted if arg not in have]
            if lacking:
                problems.append(f"'{name}' has no argument{'s' if len(lacking) > 1 else ''} {', '.join(lacking)} "
                                f"(it has {', '.join(sorted(have)) or 'none'})")
        if problems:
            self.report(FAIL, "input: the commands are not as docs/contract.md names them", *problems,
                        "key {key, action, frames}, mouse {x, y, button, action, dx, dy}, text {text}.")
            return
        self.report(PASS, "input: key {key, action, frames}, mouse {x, y, button, action, dx, dy} and text {text} "
                          "are published with the contract's argument names")


def _good_entry(entry: Any) -> bool:
    if not isinstance(entry, dict) or not is_int(entry.get("id")) or not isinstance(entry.get("ok"), bool):
        return False
    return entry["ok"] or isinstance(entry.get("error"), str)


__all__ = ["DIGEST_KEYS", "FeatureChecks", "INPUT_ARGS", "KNOWN_FEATURES", "RESULTS_KEPT", "is_scalar"]
