"""What every benchmark in scripts/ shares: one way to compute medians, percentiles and
the spread of a sample, paired differences, and one description of the machine a run
was made on. ``run_bench.py`` runs the benchmarks (the scenarios) through it."""

from __future__ import annotations

import math
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence


def percentile(values: Iterable[float], q: float) -> float:
    """The nearest-rank percentile ``q`` (0-100) of ``values``: a value of the sample."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def p95(values: Iterable[float]) -> float:
    return percentile(values, 95)


def median(values: Iterable[float], digits: int | None = None) -> float:
    middle = float(statistics.median(list(values)))
    return middle if digits is None else round(middle, digits)


def summary(values: Sequence[float], *, scale: float = 1.0, digits: int = 3) -> dict[str, float]:
    """Median, p95 and the spread (interquartile range) of a sample, each times ``scale``
    (1000 for seconds to ms) and rounded to ``digits``; ``n`` the sample's size."""
    ordered = sorted(v * scale for v in values)
    quart = statistics.quantiles(ordered, n=4) if len(ordered) >= 4 else [ordered[0], 0.0, ordered[-1]]
    return {"median": round(statistics.median(ordered), digits), "p95": round(p95(ordered), digits),
            "iqr": round(quart[2] - quart[0], digits), "n": len(ordered)}


def in_ms(samples_s: Sequence[float], *, digits: int = 3) -> dict[str, float]:
    """:func:`summary` of times in seconds, in milliseconds, its fields named so
    (``medianMs``, ``p95Ms``, ``iqrMs``; ``n``)."""
    figures = summary(samples_s, scale=1000, digits=digits)
    return {"medianMs": figures["median"], "p95Ms": figures["p95"], "iqrMs": figures["iqr"], "n": figures["n"]}


def text(values: Sequence[float], *, unit: str = "ms", digits: int = 1) -> str:
    """A sample in one line for a person: its median, p95, least and most."""
    figures = summary(values, digits=digits)
    return (f"median {figures['median']:.{digits}f} {unit} (p95 {figures['p95']:.{digits}f}, "
            f"min {min(values):.{digits}f}, max {max(values):.{digits}f}, n {len(values)})")


def paired(values: Sequence[float], floor: Sequence[float], **kwargs: Any) -> dict[str, float]:
    """:func:`summary` of the round-by-round differences ``values[i] - floor[i]`` (both
    measured in the same round, so what the round's moment cost falls on both)."""
    return summary([a - b for a, b in zip(values, floor)], **kwargs)


def machine(python: str | None = None) -> dict[str, Any]:
    """The machine a run was made on: CPUs and their model, the load average at the
    start (other work on the machine), the Python and mcp versions (of ``python``, the
    interpreter that runs the servers, when given), the platform."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    out: dict[str, Any] = {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version(),
                           "platform": platform.platform(), "loadAverage": load_average()}
    probe = subprocess.run([python or sys.executable, "-c", "import sys\ntry:\n import importlib.metadata as m; "
                            "v = m.version('mcp')\nexcept Exception:\n v = ''\nprint(sys.version.split()[0], v)"],
                           capture_output=True, text=True, timeout=30)
    server_python, _, mcp_version = probe.stdout.strip().partition(" ")
    out["serverPython"], out["mcp"] = server_python, mcp_version
    return out


def load_average() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return -1.0


__all__ = ["in_ms", "load_average", "machine", "median", "p95", "paired", "percentile", "summary", "text"]
