"""Gymnasium spaces as an agent sees them: an action space's JSON Schema and the JSON value
that becomes an action (every value checked against the space, each refusal saying where
and why), an action shown back as JSON, and an observation summed up for ``/state``.
Works on any object shaped as Gymnasium's spaces; imports numpy only when called."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: Most elements an array action or a shown observation part may have.
MAX_ELEMENTS = 4096
#: An observation array with at most this many elements is shown whole in ``/state``.
SHOWN_ELEMENTS = 64
#: Keys of a Dict observation shown, at most; characters of a text observation.
SHOWN_KEYS = 32
SHOWN_TEXT = 500


def kind(space: Any) -> str:
    return type(space).__name__


def discrete_range(space: Any) -> tuple[int, int]:
    start = int(getattr(space, "start", 0))
    return start, start + int(space.n) - 1


def schema(space: Any, depth: int = 0) -> dict[str, Any]:
    """The JSON Schema of one value of ``space`` (``{}``: any JSON value, checked on arrival)."""
    name = kind(space)
    if depth > 8:
        return {}
    if name == "Discrete":
        low, high = discrete_range(space)
        return {"type": "integer", "minimum": low, "maximum": high}
    if name == "Box":
        return _array_schema(tuple(space.shape), _box_item(space))
    if name == "MultiDiscrete":
        nvec = space.nvec
        start = getattr(space, "start", None)
        item: dict[str, Any] = {"type": "integer", "minimum": int(start.min()) if start is not None else 0}
        return _array_schema(tuple(nvec.shape), item)
    if name == "MultiBinary":
        return _array_schema(tuple(space.shape), {"type": "integer", "minimum": 0, "maximum": 1})
    if name == "Text":
        return {"type": "string", "minLength": int(space.min_length), "maxLength": int(space.max_length)}
    if name == "Dict":
        props = {str(key): schema(sub, depth + 1) for key, sub in space.spaces.items()}
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
    if name == "Tuple":
        items = [schema(sub, depth + 1) for sub in space.spaces]
        return {"type": "array", "prefixItems": items, "minItems": len(items), "maxItems": len(items)}
    return {}


def _box_item(space: Any) -> dict[str, Any]:
    import numpy as np

    integer = np.issubdtype(space.dtype, np.integer)
    item: dict[str, Any] = {"type": "integer" if integer else "number"}
    for key, bound in (("minimum", space.low), ("maximum", space.high)):
        values = np.unique(np.asarray(bound))
        if values.size == 1 and math.isfinite(float(values[0])):
            value = float(values[0])
            item[key] = int(value) if value.is_integer() else value
    return item


def _array_schema(shape: tuple[int, ...], item: dict[str, Any]) -> dict[str, Any]:
    if not shape:
        return dict(item)
    inner = _array_schema(shape[1:], item)
    return {"type": "array", "items": inner, "minItems": shape[0], "maxItems": shape[0]}


def bounds_text(space: Any) -> str:
    """The bounds a Box or MultiDiscrete schema cannot say per element, in words ("" when none)."""
    import numpy as np

    name = kind(space)
    if name == "Box":
        low, high = np.asarray(space.low).ravel(), np.asarray(space.high).ravel()
        if np.unique(low).size > 1 or np.unique(high).size > 1:
            return f"; bounds per element: low {_short(low.tolist())}, high {_short(high.tolist())}"
    if name == "MultiDiscrete":
        return f"; element i is 0 to nvec[i] - 1, nvec {_short(np.asarray(space.nvec).tolist())}"
    return ""


def _short(values: list[Any]) -> str:
    text = str(values)
    return text if len(text) <= 300 else text[:300] + "...]"


def to_action(space: Any, value: Any, where: str = "action") -> Any:
    """The JSON ``value`` as an action of ``space``; ValueError saying where it does not fit."""
    import numpy as np

    name = kind(space)
    if name == "Discrete":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
            raise ValueError(f"{where} must be a whole number, got {_show(value)}")
        low, high = discrete_range(space)
        if not low <= int(value) <= high:
            raise ValueError(f"{where} is {int(value)}, outside the action space: {low} to {high}")
        return np.int64(int(value))
    if name in ("Box", "MultiDiscrete", "MultiBinary"):
        return _array_action(space, value, where)
    if name == "Text":
        if not isinstance(value, str):
            raise ValueError(f"{where} must be a string, got {_show(value)}")
        if not space.contains(value):
            raise ValueError(f"{where} {_show(value)} is not in the text space: {space.min_length} to "
                             f"{space.max_length} characters from its character set")
        return value
    if name == "Dict":
        if not isinstance(value, Mapping):
            raise ValueError(f"{where} must be an object with {', '.join(map(str, space.spaces))}, got {_show(value)}")
        extra = sorted(set(value) - set(space.spaces))
        missing = [key for key in space.spaces if key not in value]
        if extra or missing:
            raise ValueError(f"{where} must have exactly the keys {', '.join(map(str, space.spaces))}"
                             + (f" (missing {', '.join(missing)})" if missing else "")
                             + (f" (unknown {', '.join(map(str, extra))})" if extra else ""))
        return {key: to_action(sub, value[key], f"{where}.{key}") for key, sub in space.spaces.items()}
    if name == "Tuple":
        if not isinstance(value, list) or len(value) != len(space.spaces):
            raise ValueError(f"{where} must be an array of {len(space.spaces)} values, got {_show(value)}")
        return tuple(to_action(sub, item, f"{where}[{i}]") for i, (sub, item) in enumerate(zip(space.spaces, value)))
    if space.contains(value):
        return value
    raise ValueError(f"{where} {_show(value)} is not in the action space {space}")


def _array_action(space: Any, value: Any, where: str) -> Any:
    import numpy as np

    shape = tuple(space.shape)
    if shape and not isinstance(value, list):
        raise ValueError(f"{where} must be an array of shape {list(shape)}, got {_show(value)}")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where} must be numbers in an array of shape {list(shape)}, got {_show(value)}") from None
    if array.shape != shape:
        raise ValueError(f"{where} has shape {list(array.shape)}; the action space's is {list(shape)}")
    if array.size > MAX_ELEMENTS:
        raise ValueError(f"{where} has {array.size} elements; at most {MAX_ELEMENTS} are taken")
    if not np.isfinite(array).all():
        raise ValueError(f"{where} holds a number that is not finite")
    integer = np.issubdtype(space.dtype, np.integer)
    if integer and not (array == np.round(array)).all():
        raise ValueError(f"{where} must hold whole numbers")
    action = array.astype(space.dtype)
    if not space.contains(action):
        raise ValueError(f"{where} {_show(value)} is outside the action space {_space_text(space)}")
    return action


def _space_text(space: Any) -> str:
    text = str(space)
    return text if len(text) <= 200 else text[:200] + "..."


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


def to_json(value: Any, depth: int = 0) -> Any:
    """An action or observation part as plain JSON (arrays as lists, numpy numbers as numbers)."""
    import numpy as np

    if depth > 8:
        return None
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(key): to_json(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(item, depth + 1) for item in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def summary(obs: Any, depth: int = 0) -> Any:
    """An observation for ``/state``: numbers, short texts and small arrays as they are; a
    large array as its shape and type (the picture is ``/screenshot``, the text ``ui.text``)."""
    import numpy as np

    if depth > 4:
        return None
    if isinstance(obs, np.ndarray):
        if obs.size <= SHOWN_ELEMENTS:
            return obs.tolist()
        return {"shape": list(obs.shape), "dtype": str(obs.dtype)}
    if isinstance(obs, np.generic):
        return obs.item()
    if isinstance(obs, str):
        return obs if len(obs) <= SHOWN_TEXT else obs[:SHOWN_TEXT] + "..."
    if isinstance(obs, (bool, int, float)) or obs is None:
        return obs
    if isinstance(obs, Mapping):
        keys = list(obs)[:SHOWN_KEYS]
        return {str(key): summary(obs[key], depth + 1) for key in keys}
    if isinstance(obs, (list, tuple)):
        return [summary(item, depth + 1) for item in list(obs)[:SHOWN_KEYS]]
    return {"type": type(obs).__name__}


def scalars(info: Mapping[str, Any]) -> dict[str, Any]:
    """The scalars of an ``info`` dict (numbers, booleans, short strings), as JSON."""
    import numpy as np

    out: dict[str, Any] = {}
    for key, value in list(info.items())[:64]:
        if isinstance(value, np.generic):
            value = value.item()
        elif isinstance(value, np.ndarray) and value.size == 1 and value.ndim == 0:
            value = value.item()
        elif hasattr(value, "value") and hasattr(value, "name") and isinstance(getattr(value, "value"), (int, str)):
            value = getattr(value, "name")  # an enum (NetHack's end_status)
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        if isinstance(value, (bool, int, float)) or value is None or (isinstance(value, str) and len(value) <= 200):
            out[str(key)[:64]] = value
    return out
