"""The game-bridge contract as names and numbers, in one place: endpoints, parameters, headers,
extension names, environment variables, limits, confirmation labels and the condition shape.
Importing nothing of the package, so the kit, the bridge and ``check`` all spell the contract
from here; docs/contract.md says what each means on the wire."""

from __future__ import annotations

from typing import Any

# ----------------------------------------------------------------------------- the wire

#: The version of the ``/tools`` document (``game.protocol``) and of a registry entry.
PROTOCOL = 1

HEALTH = "/health"
STATE = "/state"
COMMAND = "/command"
TOOLS = "/tools"
#: The ``events`` extension's endpoint.
EVENTS = "/events"
#: The ``screenshot`` extension's endpoint.
SCREENSHOT = "/screenshot"
#: The ``snapshot`` extension's endpoint: ``GET /snapshot?id=`` the bytes, ``POST /snapshot`` them back.
SNAPSHOT = "/snapshot"

#: ``/command``'s key for the command's name; every other query parameter is an argument.
CMD = "cmd"
#: ``after``: ``/state`` and ``/health`` held until ``completedCommandId >= after`` ...
AFTER = "after"
#: ... or this many milliseconds have passed (0 to :data:`MAX_HOLD_MS`).
WAIT_MS = "waitMs"
#: ``view``: ``/state?view=digest``.
VIEW = "view"
VIEW_DIGEST = "digest"
#: ``events``: ``/events?since=S&limit=L``.
SINCE = "since"
LIMIT = "limit"
#: ``screenshot``: ``/screenshot?maxWidth=W&maxHeight=H``.
MAX_WIDTH = "maxWidth"
MAX_HEIGHT = "maxHeight"

#: ``screenshot``: the frame the image shows, rendered after the request arrived.
FRAME_HEADER = "X-Game-Frame"
#: ``screenshot`` with ``input``: the window's size in the pixels ``mouse`` uses, ``WxH``.
WINDOW_HEADER = "X-Game-Window"

# ----------------------------------------------------------------------------- extensions

RESULTS = "results"
AFTER_FEATURE = "after"
VIEW_FEATURE = "view"
EVENTS_FEATURE = "events"
SCREENSHOT_FEATURE = "screenshot"
CLOCK = "clock"
INPUT = "input"
SNAPSHOT_FEATURE = "snapshot"
#: Every extension, as a game lists it in ``/health`` ``features``.
FEATURES = (RESULTS, AFTER_FEATURE, VIEW_FEATURE, EVENTS_FEATURE, SCREENSHOT_FEATURE, CLOCK, INPUT, SNAPSHOT_FEATURE)

#: ``clock``'s commands.
CLOCK_COMMANDS = ("pause", "resume", "step")
#: ``snapshot``'s commands: save (its result ``{id, simFrame, bytes}``), load and drop (argument ``id``).
SNAPSHOT_SAVE = "snapshot_save"
SNAPSHOT_LOAD = "snapshot_load"
SNAPSHOT_DROP = "snapshot_drop"
SNAPSHOT_COMMANDS = (SNAPSHOT_SAVE, SNAPSHOT_LOAD, SNAPSHOT_DROP)
#: ``snapshot``: ``GET /snapshot?id=<id>`` and the commands' argument.
SNAPSHOT_ID = "id"
#: ``snapshot``: ``/state``'s keys a load does not give back (they go on counting; whether the
#: clock runs is not part of a snapshot).
NOT_RESTORED_KEYS = ("frame", "completedCommandId", "commandResults", "events", "paused")
#: ``snapshot``: the event a load adds (with ``id``).
SNAPSHOT_LOADED_EVENT = "snapshot:loaded"
#: ``snapshot``: ``/health``'s field for the largest body ``POST /snapshot`` takes.
SNAPSHOT_MAX_BYTES_FIELD = "snapshotMaxBytes"
#: ``input``'s commands and the argument names each takes.
INPUT_ARGS = {"key": ("key", "action", "frames"), "mouse": ("x", "y", "button", "action", "dx", "dy"),
              "text": ("text",)}
#: ``mouse``'s actions (``wheel`` scrolls by ``dx``, ``dy`` pixels at ``x``, ``y``).
MOUSE_ACTIONS = ("click", "down", "up", "move", "wheel")
#: ``view=digest`` keeps these top-level keys whole, and inside ``game`` only the scalar values.
DIGEST_KEEPS = ("frame", "simFrame", "completedCommandId", "paused", "ui", "events", "commandResults")

# ----------------------------------------------------------------------------- names a game may not use

#: The bridge's own toolset, in the order it is listed: a game's tool of one of these names
#: is dropped from its manifest, since it would hide the bridge's.
BRIDGE_TOOLSET = ("get_state", "get_health", "raw_command", "wait_for", "get_screenshot", "advance",
                  "get_events", "save_state", "restore_state", "fork_instance", "list_states", "close")

# ----------------------------------------------------------------------------- environment

#: The port a game serves its debug surface on (the kit's ``--debug-port`` otherwise).
ENV_DEBUG_PORT = "GAME_BRIDGE_DEBUG_PORT"
#: ``clock``: ``1`` starts the game paused.
ENV_START_PAUSED = "GAME_BRIDGE_START_PAUSED"
#: Where the registry entries live; and the directory above it.
ENV_INSTANCES = "GAME_BRIDGE_INSTANCES"
ENV_HOME = "GAME_BRIDGE_HOME"
#: A wrapper's seed for the game's random generators, when its ``--seed`` does not give one.
ENV_SEED = "GAME_BRIDGE_SEED"
#: The browser wrapper's start date (ISO 8601 or Unix ms), when its ``--date`` does not give one.
ENV_DATE = "GAME_BRIDGE_DATE"
#: Set by the bridge on every process it launches, to find them again.
ENV_LAUNCH_ID = "GAME_BRIDGE_LAUNCH_ID"

# ----------------------------------------------------------------------------- limits

#: ``after``'s longest hold, in milliseconds.
MAX_HOLD_MS = 10_000
#: ``step``'s ``frames``, and ``advance``'s.
MAX_STEP_FRAMES = 10_000
#: ``/events``' ``limit``: at most, and when not given.
MAX_EVENTS_LIMIT = 1000
DEFAULT_EVENTS_LIMIT = 100
#: ``results``: how many outcomes ``commandResults`` keeps at least.
RESULTS_KEPT = 16
#: ``/tools`` ``game.description``, as ``list_toolsets`` shows it, in characters.
DESCRIPTION_CHARS = 2000
#: ``/state`` ``ui.text``, the text picture of the screen, in characters.
UI_TEXT_CHARS = 4000
#: A command's ``result`` in an answer, in characters of JSON.
RESULT_CHARS = 2000
#: ``snapshot``: ``snapshotMaxBytes`` when ``/health`` does not say (64 MiB), and how many
#: snapshots a game keeps that it was not told to drop.
SNAPSHOT_MAX_BYTES = 64 * 1024 * 1024
SNAPSHOTS_KEPT = 16
#: ``snapshot``: an id is at most this long, from ``[A-Za-z0-9._-]``.
SNAPSHOT_ID_CHARS = 64
SNAPSHOT_ID_PATTERN = r"[A-Za-z0-9._-]{1,64}"

# ----------------------------------------------------------------------------- confirmation

#: How sure ``applied`` is: the game's ``completedCommandId`` reached the command's id ...
CONFIRMED_BY_ID = "completedCommandId"
#: ... or, for a game without it, ``frame`` advanced by :data:`CONFIRM_FRAMES`.
CONFIRMED_BY_FRAMES = "frames-advanced"
CONFIRM_FRAMES = 2
#: A command on a paused game that waits for its clock: answered at once, delivered by
#: the next ``advance`` (docs/clock.md).
PENDING = "pending"

# ----------------------------------------------------------------------------- conditions

#: The keys of a condition: ``{path, equals}``, ``{path, changes: true}``, ``{event}`` or
#: ``{screen: "changes" | "stable", frames, region}`` (the picture, for games whose state is pixels).
CONDITION_KEYS = ("path", "equals", "changes", "event", "screen", "frames", "region")
CONDITION_SHAPES = ('{path, equals}, {path, changes: true}, {event} or {screen: "changes"} / '
                    '{screen: "stable", frames} (optionally with a region {x, y, width, height})')
#: ``screen``'s waits, and ``stable``'s frames when not given.
SCREEN_WAITS = ("changes", "stable")
DEFAULT_STABLE_FRAMES = 10
#: ``/screenshot?hash=1``: a hash of the picture (or of a region of it) instead of an image.
SCREEN_HASH_PARAM = "hash"
REGION_KEYS = ("x", "y", "width", "height")
#: A condition's ``timeoutMs`` (``until`` and ``wait_for``; ``advance`` counts frames).
TIMEOUT_KEY = "timeoutMs"
DEFAULT_WAIT_MS = 5000
MAX_WAIT_MS = 600_000


#: What a tool says of ``screen``, ``frames`` and ``region`` (the same for every tool).
SCREEN_WORDS = ("Wait on the picture (a game with the screenshot feature): 'changes' (it differs from before) "
                "or 'stable' (unchanged for frames frames). For games whose state is only pixels.")
FRAMES_WORDS = f"With screen 'stable': how many frames the picture must hold still (default {DEFAULT_STABLE_FRAMES})."
REGION_WORDS = "With screen: only this part of the picture, in the game window's pixels (as mouse takes them)."


def condition_properties(*, path: str, equals: str, changes: str, event: str, timeout: str) -> dict[str, Any]:
    """A condition's JSON Schema properties, in :data:`CONDITION_KEYS` order and then
    ``timeoutMs``, each with the description given (what a tool says of it)."""
    return {
        "path": {"type": "string", "description": path},
        "equals": {"description": equals},
        "changes": {"type": "boolean", "description": changes},
        "event": {"type": "string", "description": event},
        "screen": {"type": "string", "enum": list(SCREEN_WAITS), "description": SCREEN_WORDS},
        "frames": {"type": "integer", "minimum": 1, "maximum": MAX_STEP_FRAMES, "description": FRAMES_WORDS},
        "region": {"type": "object", "description": REGION_WORDS, "additionalProperties": False,
                   "required": list(REGION_KEYS),
                   "properties": {key: {"type": "integer", "minimum": 1 if key in ("width", "height") else 0}
                                  for key in REGION_KEYS}},
        TIMEOUT_KEY: {"type": "integer", "minimum": 1, "maximum": MAX_WAIT_MS, "description": timeout}}
