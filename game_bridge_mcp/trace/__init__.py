"""Record and replay: an agent's session as a trace file, replayed as a regression test. Nothing
here imports the MCP SDK."""

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
