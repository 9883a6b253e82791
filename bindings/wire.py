"""What every HTTP binding checks in a JSON body before a codec sees it.

JSON-RPC and REST both read bodies with `json_loads`: NaN and Infinity are not JSON, numbers
too large for a float are refused, and `unstorable_text` finds strings the platform cannot keep:
U+0000, which PostgreSQL cannot store, and lone UTF-16 surrogates (`"\ud800"` is valid JSON but
no Unicode text: neither UTF-8, protobuf nor PostgreSQL can hold it).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


class BadJson(ValueError):
    """The body is not JSON this server accepts; the message says why."""


def json_loads(raw: bytes | str) -> Any:
    try:
        return json.loads(raw, parse_constant=_reject_constant, parse_float=_finite_float)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadJson(f"The body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadJson(
            "The body is not valid JSON: it is nested too deeply for this server."
        ) from None


# U+0000, and a surrogate code point standing alone (a pair in JSON decodes to one character).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable_text(value: Any) -> str | None:
    """What makes a string in a JSON value unstorable (its keys included), or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if found := _UNSTORABLE.search(item):
                char = found.group()
                return (
                    "must not contain U+0000 (NUL)"
                    if char == "\x00"
                    else f"must be Unicode text: U+{ord(char):04X} is a lone UTF-16 surrogate"
                )
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None
