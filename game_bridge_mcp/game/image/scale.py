"""Exact box-filter downscaling of raw pixels in pure Python, a few C-level operations per
row of the scaling pattern (docs/design.md, "Scaling raw pixels")."""

from __future__ import annotations

import math

#: Channels per pixel for each mode the kit handles.
MODES = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}


def fit_size(width: int, height: int, max_width: int, max_height: int) -> tuple[int, int]:
    """The largest size within ``max_width`` x ``max_height`` with the aspect ratio of
    ``width`` x ``height``, never larger than the original (no upscaling), at least 1x1."""
    if width < 1 or height < 1:
        raise ValueError(f"an image must be at least 1x1 pixels, not {width}x{height}")
    if max_width < 1 or max_height < 1:
        raise ValueError(f"the size limit must be at least 1x1, not {max_width}x{max_height}")
    if width <= max_width and height <= max_height:
        return width, height
    # Compare ratios in integers: scale by whichever limit binds first.
    if max_width * height <= max_height * width:
        new_w = max_width
        new_h = max(1, min(max_height, (2 * height * max_width + width) // (2 * width)))
    else:
        new_h = max_height
        new_w = max(1, min(max_width, (2 * width * max_height + height) // (2 * height)))
    return new_w, new_h


def _phases(n_in: int, n_out: int) -> tuple[int, int, int, list[list[tuple[int, int]]]]:
    """``(p, q, g, table)``: ``table[t]`` lists ``(s, overlap)`` for output phase ``t``,
    in units where an input pixel is ``q`` long and an output pixel ``p`` long (the
    overlaps of one output pixel add up to ``p``)."""
    g = math.gcd(n_in, n_out)
    p, q = n_in // g, n_out // g
    table = []
    for t in range(q):
        lo, hi = t * p, (t + 1) * p
        row = []
        for s in range(lo // q, -(-hi // q)):
            overlap = min((s + 1) * q, hi) - max(s * q, lo)
            if overlap > 0:
                row.append((s, overlap))
        table.append(row)
    return p, q, g, table


def _lanes_of(value: int, width: int, count: int) -> int:
    """An int whose ``count`` lanes of ``width`` bytes each hold ``value``."""
    return int.from_bytes(value.to_bytes(width, "little") * count, "little")


def _weighted_sum(terms: list[tuple[int, int]], parts: list[int]) -> int:
    total = 0
    for index, weight in terms:
        total += parts[index] if weight == 1 else weight * parts[index]
    return total


def box_downscale(data: bytes | bytearray | memoryview, width: int, height: int,
                  channels: int, new_width: int, new_height: int) -> bytes:
    """Scale raw interleaved 8-bit pixels (``channels`` per pixel, rows top to bottom,
    no padding) down to ``new_width`` x ``new_height`` by exact area averaging.

    Channels are averaged independently (straight alpha, as ``smoothscale`` does).
    Raises ValueError when the buffer does not hold ``width*height*channels`` bytes or
    the new size is larger than the old in either direction.
    """
    if not 1 <= channels <= 4:
        raise ValueError(f"channels must be 1 to 4, not {channels}")
    if width < 1 or height < 1 or new_width < 1 or new_height < 1:
        raise ValueError(f"sizes must be at least 1x1 ({width}x{height} -> {new_width}x{new_height})")
    if new_width > width or new_height > height:
        raise ValueError(f"box_downscale only shrinks: {width}x{height} -> {new_width}x{new_height}")
    src = bytes(data)
    if len(src) != width * height * channels:
        raise ValueError(f"{width}x{height} pixels of {channels} bytes need {width * height * channels} "
                         f"bytes, got {len(src)}")
    if (new_width, new_height) == (width, height):
        return src
    ch = channels
    p, q, g, across = _phases(width, new_width)
    p2 = height // math.gcd(height, new_height)
    area = p * p2  # the sum of one output pixel's weights
    # Exact round-half-up division of x by area: y = 2x + area < 2**bits, then
    # floor(y / (2 * area)) == (y * magic) >> shift for every such y (see _Vertical).
    bits = (2 * 255 * area + area).bit_length()
    lane1 = max(1, (255 * p).bit_length() + 7 >> 3)       # after the horizontal pass
    lane2 = (2 * bits + 2 + 7) >> 3                        # room for y * magic
    lanes = height * g * ch                                # lanes of one column phase

    # Pass 1 gathers: every column x with x % p == s, all rows, as one big int.
    classes = []
    buf = bytearray(lane1 * lanes)
    for s in range(p):
        for c in range(ch):
            buf[lane1 * c::lane1 * ch] = src[s * ch + c::p * ch]
        classes.append(int.from_bytes(buf, "little"))
    del buf, src
    # Pass 2 (vertical) per column phase when there are few phases, else once over the
    # whole image transposed back to rows (ratios with no common factor: one phase per column).
    vertical = _Vertical(height, new_height, area, lane2)
    out = bytearray(new_width * new_height * ch)
    if q <= _MAX_PHASES_SEPARATE:
        for t in range(q):
            packed = _weighted_sum(across[t], classes).to_bytes(lane1 * lanes, "little")
            phase = vertical.apply(_widen(packed, lane1, lane2, lanes), g * ch)
            if q == 1:
                out[:] = phase
            else:
                for c in range(ch):
                    out[t * ch + c::q * ch] = phase[c::ch]
        return bytes(out)
    wide = bytearray(lane2 * height * new_width * ch)
    for t in range(q):
        packed = _weighted_sum(across[t], classes).to_bytes(lane1 * lanes, "little")
        for c in range(ch):
            for b in range(lane1):
                wide[lane2 * (t * ch + c) + b::lane2 * q * ch] = packed[lane1 * c + b::lane1 * ch]
    del classes
    return bytes(vertical.apply(wide, new_width * ch))


#: Above this many column phases, pass 2 runs once over the transposed image instead.
_MAX_PHASES_SEPARATE = 64


def _widen(packed: bytes, lane1: int, lane2: int, lanes: int) -> bytes | bytearray:
    if lane1 == lane2:
        return packed
    wide = bytearray(lane2 * lanes)
    for b in range(lane1):
        wide[b::lane2] = packed[b::lane1]
    return wide


class _Vertical:
    """The vertical pass and the exact division, over rows of ``row_lanes`` lanes."""

    def __init__(self, height: int, new_height: int, area: int, lane2: int) -> None:
        self.p2, self.q2, self.g2, self.down = _phases(height, new_height)
        self.new_height = new_height
        self.lane2 = lane2
        bits = (2 * 255 * area + area).bit_length()
        self.shift = bits + (2 * area - 1).bit_length()
        self.magic = -(-(1 << self.shift) // (2 * area))
        self.area = area
        self._constants: dict[int, tuple[int, int]] = {}

    def apply(self, wide: bytes | bytearray, row_lanes: int) -> bytearray:
        """``wide``: rows of ``row_lanes`` lanes of ``lane2`` bytes holding horizontal
        sums; returns ``new_height`` rows of ``row_lanes`` averaged bytes."""
        p2, q2, g2, lane2 = self.p2, self.q2, self.g2, self.lane2
        n = g2 * row_lanes
        if row_lanes not in self._constants:
            self._constants[row_lanes] = (_lanes_of(self.area, lane2, n), _lanes_of(0xFF, lane2, n))
        offset, low_byte = self._constants[row_lanes]
        row_bytes = lane2 * row_lanes
        view = memoryview(wide)
        rows = [int.from_bytes(b"".join([view[(s + p2 * k) * row_bytes:(s + p2 * k + 1) * row_bytes]
                                         for k in range(g2)]), "little")
                for s in range(p2)]
        view.release()
        result = bytearray(self.new_height * row_lanes)
        for t2 in range(q2):
            total = _weighted_sum(self.down[t2], rows)
            values = (((2 * total + offset) * self.magic >> self.shift) & low_byte).to_bytes(lane2 * n, "little")
            chunk = values[0::lane2]
            if q2 == 1:
                result[:] = chunk
            else:
                for k in range(g2):
                    r = t2 + q2 * k
                    result[r * row_lanes:(r + 1) * row_lanes] = chunk[k * row_lanes:(k + 1) * row_lanes]
        return result
