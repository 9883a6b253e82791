"""What every HTTP binding checks in a JSON body before a codec sees it.

JSON-RPC and REST both read bodies with `json_loads`: NaN and Infinity are not JSON, numbers
too large for a float are refused, and `unstorable_text` finds strings the platform cannot keep:
U+0000, which PostgreSQL cannot store, and lone UTF-16 surrogates (`"\ud800"` is valid JSON but
no Unicode text: neither UTF-8, protobuf nor PostgreSQL can hold it).
"""

from __future__ import annotations

import json
import math
from typing import Any

from a2a_platform.text import unstorable_text

__all__ = ["BadJson", "json_loads", "unstorable_text"]


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
