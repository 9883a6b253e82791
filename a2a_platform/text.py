"""Text the database cannot keep: one check for every path that stores what a client or a
person sent (the bindings' messages, an agent's fields)."""

from __future__ import annotations

import re
from typing import Any

# U+0000, which PostgreSQL cannot store in text or JSON, and a UTF-16 surrogate standing alone
# (JSON's "\ud800" decodes to one; no UTF-8 can carry it; a pair decodes to one character).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable_text(value: Any) -> str | None:
    """What makes a string in a JSON value (its keys included) one the database cannot keep,
    or None."""
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
