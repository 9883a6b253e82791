"""Odd values, and the mutations that put them into a valid JSON request.

Every choice is made with the `random.Random` a case is given, so a case is the same for the
same seed. Values are the kinds that broke servers before: wrong types, the edges of numbers,
text that UTF-8, protobuf or PostgreSQL cannot hold (lone surrogates, U+0000), text that is
huge, empty, or odd in other ways, and structures nested deeper than parsers recurse.
"""

from __future__ import annotations

import base64
import json
import random
import uuid
from typing import Any

# Strings that are valid JSON but odd to a server: empty, blank, control characters, lone
# surrogates, NUL, byte-order marks, non-characters, right-to-left marks, combining marks,
# astral characters, injection shapes, and strings that look like other types or ids.
ODD_STRINGS: tuple[str, ...] = (
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "\udfff",
    "x\udc00y",
    "\ud83d",
    "\ufeff",
    "\uffff",
    "\ufffe",
    "\U0010ffff",
    "\ufdd0",
    "\u202eevil",
    "e\u0301" * 50,
    "🙂" * 20,
    "\x01\x02\x1f\x7f",
    "\r\n",
    "line\nbreak",
    "\t",
    "../../etc/passwd",
    "%00",
    "%2F",
    "tasks/",
    "tasks/x/pushNotificationConfigs/y",
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    "null",
    "true",
    "0",
    "-1",
    "1e999",
    "NaN",
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "{}",
    "[]",
    "ROLE_USER",
    "TASK_STATE_COMPLETED",
    "text/plain",
    "http://127.0.0.1:9/",
    "file:///etc/passwd",
    "1.0",
    "0.3",
)

ODD_NUMBERS: tuple[Any, ...] = (
    0,
    -1,
    1,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**53 + 1,
    2**63,
    -(2**63) - 1,
    2**64,
    10**40,
    -(10**40),
    0.5,
    -0.0,
    1e308,
    -1e308,
    5e-324,
    1.7976931348623157e308,
)

ODD_SCALARS: tuple[Any, ...] = (None, True, False, *ODD_NUMBERS)


def odd_string(rng: random.Random) -> str:
    """A string from ODD_STRINGS, a random one, or a long one."""
    roll = rng.random()
    if roll < 0.6:
        return rng.choice(ODD_STRINGS)
    if roll < 0.85:
        return random_text(rng, rng.randint(1, 40))
    return rng.choice("xé🙂\u0301") * rng.choice((1_000, 10_000, 70_000))


def random_text(rng: random.Random, length: int) -> str:
    """Code points from anywhere in Unicode, surrogates and controls included."""
    pools = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0xD800, 0xDFFF), (0x10000, 0x10FFFF))
    chars = []
    for _ in range(length):
        low, high = rng.choice(pools)
        chars.append(chr(rng.randint(low, high)))
    return "".join(chars)


def deep(rng: random.Random, depth: int | None = None) -> Any:
    """A value nested `depth` levels (random: around protobuf's limit of 100, or deeper; bodies
    nested past any parser's limit are `body_mutation`'s)."""
    depth = depth or rng.choice((5, 99, 101, 150, 600, 900))
    value: Any = rng.choice(("leaf", 1, None, {}, []))
    for _ in range(depth):
        value = {"a": value} if rng.random() < 0.5 else [value]
    return value


def odd_value(rng: random.Random) -> Any:
    """Any odd JSON value: a scalar, a string, a container, a huge or a deep one."""
    roll = rng.random()
    if roll < 0.35:
        return odd_string(rng)
    if roll < 0.65:
        return rng.choice(ODD_SCALARS)
    if roll < 0.75:
        return rng.choice(([], {}, [None], [""], {"": ""}, {"\x00": 1}, {"\ud800": 1}))
    if roll < 0.85:
        return [odd_scalar_or_string(rng) for _ in range(rng.choice((2, 50, 2_000)))]
    if roll < 0.92:
        return {odd_string(rng)[:40] or "k": odd_scalar_or_string(rng) for _ in range(3)}
    return deep(rng)


def odd_scalar_or_string(rng: random.Random) -> Any:
    return rng.choice(ODD_SCALARS) if rng.random() < 0.5 else rng.choice(ODD_STRINGS)


# --- paths into a JSON value ------------------------------------------------------------------

Path = tuple[Any, ...]


# Paths are looked for this deep, and this many at most: a mutation may have nested a value
# hundreds of levels deep, or made a list of thousands.
PATH_DEPTH = 12
PATH_COUNT = 500


def paths(value: Any) -> list[Path]:
    """Paths to values inside `value` (the root excluded), breadth first, within PATH_DEPTH
    and PATH_COUNT."""
    found: list[Path] = []
    queue: list[tuple[Path, Any]] = [((), value)]
    while queue and len(found) < PATH_COUNT:
        prefix, item = queue.pop(0)
        if len(prefix) >= PATH_DEPTH:
            continue
        for key, child in _children(item):
            found.append((*prefix, key))
            queue.append(((*prefix, key), child))
    return found[:PATH_COUNT]


def _children(value: Any) -> Any:
    if isinstance(value, dict):
        return value.items()
    if isinstance(value, list):
        return enumerate(value)
    return ()


def _parent(value: Any, path: Path) -> Any:
    for step in path[:-1]:
        value = value[step]
    return value


def copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


def mutate(rng: random.Random, value: Any, rounds: int | None = None) -> tuple[Any, list[str]]:
    """A copy of `value` with one to three mutations, and what each was."""
    value = copy(value)
    done = []
    for _ in range(rounds or rng.choice((1, 1, 1, 2, 3))):
        value, what = _mutate_once(rng, value)
        done.append(what)
    return value, done


def _mutate_once(rng: random.Random, value: Any) -> tuple[Any, str]:
    spots = paths(value)
    if not spots or rng.random() < 0.05:
        return odd_value(rng), "root replaced"
    path = rng.choice(spots)
    parent = _parent(value, path)
    key = path[-1]
    name = ".".join(str(step) for step in path)
    roll = rng.random()
    if roll < 0.45:
        parent[key] = odd_value(rng)
        return value, f"{name}: odd value"
    if roll < 0.6:
        del parent[key]
        return value, f"{name}: removed"
    if roll < 0.7 and isinstance(parent, dict):
        extra = rng.choice((odd_string(rng)[:60] or "extra", "kind", "id", "tenant", "metadata"))
        parent[extra] = odd_value(rng)
        return value, f"{name}: sibling {extra[:20]!r} added"
    if roll < 0.8:
        parent[key] = _wrong_type(rng, parent[key])
        return value, f"{name}: wrong type"
    if roll < 0.88:
        parent[key] = rng.choice(("", [], {}, None, 0))
        return value, f"{name}: emptied"
    if roll < 0.94 and isinstance(parent[key], str):
        parent[key] = parent[key] + rng.choice(ODD_STRINGS)
        return value, f"{name}: odd suffix"
    if isinstance(parent, dict) and isinstance(key, str):
        parent[key.upper() if rng.random() < 0.5 else key + "_"] = parent.pop(key)
        return value, f"{name}: key renamed"
    parent[key] = [parent[key]]
    return value, f"{name}: wrapped in a list"


def _wrong_type(rng: random.Random, current: Any) -> Any:
    """A value of another JSON type than `current`."""
    options: list[Any] = [
        "text",
        17,
        1.5,
        True,
        None,
        [current],
        {"value": current},
    ]
    return rng.choice([o for o in options if type(o) is not type(current)])


# --- encoding -----------------------------------------------------------------------------


def encode(rng: random.Random, value: Any) -> bytes:
    """JSON bytes of `value`: usually escaped ASCII, sometimes raw UTF-8, where a lone
    surrogate becomes bytes that are not UTF-8 at all."""
    if rng.random() < 0.7:
        return json.dumps(value, ensure_ascii=True).encode()
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def body_mutation(rng: random.Random, body: bytes) -> tuple[bytes, str]:
    """The JSON body's bytes themselves made wrong: cut, flipped, padded, re-encoded."""
    roll = rng.random()
    if roll < 0.25 and body:
        cut = rng.randrange(len(body))
        return body[:cut], f"truncated at byte {cut} of {len(body)}"
    if roll < 0.4 and body:
        data = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data), "bytes flipped"
    if roll < 0.5:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))), "random bytes"
    if roll < 0.58:
        return b"\xef\xbb\xbf" + body, "UTF-8 byte-order mark"
    if roll < 0.64:
        return body.decode("utf-8", "replace").encode("utf-16"), "UTF-16"
    if roll < 0.7:
        return body + rng.choice((b"\x00", b"garbage", b"}", b"]", b",", b"\n{}")), "trailing bytes"
    if roll < 0.76:
        return rng.choice((b"", b" ", b"\n", b"null", b"0", b'""', b"true")), "empty or a scalar"
    if roll < 0.82:
        return b"[" * 100_000 + b"]" * 100_000, "nested 100,000 deep"
    if roll < 0.88:
        text = body.decode("utf-8", "replace")
        return text.replace("{", '{"a":1,"a":2,', 1).encode(), "duplicate keys"
    if roll < 0.94:
        return body.replace(b'"', b"'"), "single quotes"
    return body + b" " * rng.choice((10_000, 1_000_000)), "padded with whitespace"


def page_token(rng: random.Random, real: str) -> str:
    """A ListTasks page token: the real one, or one made to look like it (base64 of JSON with
    wrong types, out-of-range numbers, nesting deeper than a parser recurses), or garbage."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    options = [
        real,
        real[:-3],
        real + "A",
        b64(json.dumps({"ts": 1, "id": "x"}).encode()),
        b64(json.dumps({"ts": 10**30, "id": str(uuid_like(rng))}).encode()),
        b64(json.dumps({"ts": -(10**20), "id": str(uuid_like(rng))}).encode()),
        b64(json.dumps({"ts": None, "id": str(uuid_like(rng))}).encode()),
        b64(json.dumps({"ts": 1.5, "id": 7}).encode()),
        b64(json.dumps([1, 2]).encode()),
        b64(b"[" * 50_000),
        b64(b'{"ts": 1, "id": "' + b"\\ud800" + b'"}'),
        b64(b"\xff\xfe"),
        "!!!",
        "====",
        "\x00",
        "\ud800",
        "a" * 10_000,
    ]
    return rng.choice(options)


def uuid_like(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128)))
