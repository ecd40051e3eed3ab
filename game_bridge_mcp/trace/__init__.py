"""Record and replay: an agent's session as a trace file, replayed as a regression test.

``format`` says what a trace line holds; ``writer``/``reader`` append and read them;
``recorder`` wraps the one place every tool call passes through; ``compare`` and ``replay``
re-issue the calls and compare answers under ignore rules; ``diff`` and ``report`` show the
verdict as text and as a self-contained HTML page. Nothing here imports the MCP SDK.
"""

from __future__ import annotations

from .compare import DEFAULT_IGNORE, RUNNING_CLOCK_IGNORE, Difference, IgnoreRules, differences
from .format import FORMAT, VERSION
from .reader import Call, Trace, read_trace
from .recorder import Recorder
from .replay import ReplayResult, StepOutcome, replay
from .writer import TraceWriter

__all__ = ["FORMAT", "VERSION", "DEFAULT_IGNORE", "RUNNING_CLOCK_IGNORE", "Call", "Difference",
           "IgnoreRules", "Recorder", "ReplayResult", "StepOutcome", "Trace", "TraceWriter",
           "differences", "read_trace", "replay"]
