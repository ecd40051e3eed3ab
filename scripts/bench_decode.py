#!/usr/bin/env python3
"""What bounding the decoded size costs: ``jsonio.decode_json`` counts a large body's
objects, arrays and commas before parsing it. This measures that count as a
share of the whole decode, for typical ``/state`` documents of 1, 10 and 25 MB (the
benchmark game's entity records), interleaved run by run so the ratio holds on a noisy
machine; and what refusing a hostile 60 MB body of empty objects costs (time and peak
memory, against the 1.6 GB that decoding it took).

    .venv/bin/python scripts/bench_decode.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import benchkit
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from game_bridge_mcp.game.demo import padding_json  # noqa: E402
from game_bridge_mcp.jsonio import MAX_VALUES, count_values, decode_json  # noqa: E402

_OTHER = bytes(c for c in range(256) if c not in b"{[,")


def state_body(kilobytes: int) -> bytes:
    padding = padding_json(kilobytes)
    assert padding is not None
    return ('{"frame":1,"game":{"score":3},"padding":' + padding.text + "}").encode()


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out: dict[str, object] = {"maxValues": MAX_VALUES}
    for kb in (1024, 10 * 1024, 25 * 1024):
        body = state_body(kb)
        counts, decodes = [], []
        for _ in range(args.runs):  # interleaved: both see the same machine
            counts.append(timed(lambda: count_values(body)))
            decodes.append(timed(lambda: decode_json(body)))
        count_ms, decode_ms = benchkit.median(counts) * 1000, benchkit.median(decodes) * 1000
        out[f"{kb // 1024} MB"] = {"bytes": len(body), "values": len(body.translate(None, _OTHER)), "countMs": round(count_ms, 2),
                                   "decodeMs": round(decode_ms, 1), "countShare": round(count_ms / decode_ms, 4)}
    hostile = b"[" + b"{}," * 20_000_000 + b"{}]"
    tracemalloc.start()
    started = time.perf_counter()
    try:
        decode_json(hostile)
        refused = False
    except ValueError:
        refused = True
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    out["hostile 60 MB of {}"] = {"refused": refused, "ms": round(elapsed * 1000), "peakMB": round(peak / 1e6, 1)}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"decode_json with the {MAX_VALUES:,}-value bound (median of {args.runs} interleaved runs)")
    for name, row in out.items():
        if isinstance(row, dict) and "countShare" in row:
            print(f"  {name:>6}: {row['values']:>9,} values, count {row['countMs']:7.2f} ms of a "
                  f"{row['decodeMs']:7.1f} ms decode ({row['countShare'] * 100:.1f}%)")
    row = out["hostile 60 MB of {}"]
    assert isinstance(row, dict)
    print(f"  hostile 60 MB of {{}}: refused={row['refused']} in {row['ms']} ms, peak {row['peakMB']} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
