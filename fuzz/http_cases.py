"""What JSON-RPC and REST cases share: credentials, odd headers, odd HTTP methods, encodings of
a path or query, and the HTTP-level mutations of a request that is otherwise valid."""

from __future__ import annotations

import random
from collections.abc import Iterable
from urllib.parse import quote

from . import nasty
from .target import Target

Headers = list[tuple[bytes, bytes]]

JSON = b"application/json"
# Content types a client may send by mistake (and the two the bindings accept, with
# parameters). Multipart is Twisted's to answer today (fuzz.judge.KNOWN "multipart").
CONTENT_TYPES: tuple[bytes, ...] = (
    b"application/json; charset=utf-8",
    b"application/a2a+json",
    b"application/json; charset=utf-16",
    b"application/JSON",
    b"application/vnd.api+json",
    b"text/plain",
    b"text/html",
    b"application/x-www-form-urlencoded",
    b"application/octet-stream",
    b"application/grpc",
    b"text/event-stream",
    b"*/*",
    b"json",
    b";",
    b"application/json, text/plain",
    b"application/json; boundary=x",
    b"",
)
MULTIPART = (b"multipart/form-data; boundary=xyz", b"multipart/mixed")
VERSIONS: tuple[bytes, ...] = (
    b"1.0",
    b"0.3",
    b"0.1",
    b"1",
    b"1.0.0",
    b"0.3.0",
    b"2.0",
    b"0.2",
    b"99.99",
    b"v1.0",
    b"latest",
    b"",
    b" ",
    b"1.0, 0.3",
    b"-1",
    b"1e3",
    b"1" * 5_000,
    b"\xff\xfe",
    b"1.0\x00",
)
METHODS = ("GET", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "CONNECT", "FOO", "post")


def auth(rng: random.Random, key: str) -> Headers:
    """The key, as X-API-Key or a bearer token (mostly), or a wrong or malformed credential."""
    roll = rng.random()
    if roll < 0.45:
        return [(b"X-API-Key", key.encode())]
    if roll < 0.9:
        return [(b"Authorization", b"Bearer " + key.encode())]
    return odd_auth(rng, key)


def odd_auth(rng: random.Random, key: str) -> Headers:
    options: list[Headers] = [
        [],
        [(b"X-API-Key", b"")],
        [(b"X-API-Key", key.encode() + b"x")],
        [(b"X-API-Key", b"a2a_00000000_" + b"A" * 20)],
        [(b"Authorization", b"Bearer")],
        [(b"Authorization", b"Bearer ")],
        [(b"Authorization", b"Basic " + b"Zm9vOmJhcg==")],
        [(b"Authorization", b"bearer " + key.encode())],
        [(b"Authorization", b"Bearer " + key.encode() + b" extra")],
        [(b"Authorization", b"Bearer \xff\xfe")],
        [(b"Authorization", b"Bearer " + b"k" * 10_000)],
        [(b"X-API-Key", key.encode()), (b"Authorization", b"Bearer other")],
        [(b"X-API-Key", key.encode()), (b"X-API-Key", b"other")],
        [(b"X-API-Key", "ключ".encode())],
        [(b"X-API-Key", b"\x00")],
    ]
    return rng.choice(options)


def odd_header(rng: random.Random, target: Target) -> tuple[bytes, bytes]:
    """One header a client may send wrong: versions, extensions, resume ids, hosts, ..."""
    name = rng.choice(
        (
            b"A2A-Version",
            b"A2A-Extensions",
            b"X-A2A-Extensions",
            b"Last-Event-ID",
            b"Accept",
            b"Host",
            b"Content-Encoding",
            b"Expect",
            b"X-Forwarded-Host",
            b"If-None-Match",
            b"Range",
            b"Cookie",
            b"Origin",
            b"X-Odd-\xff",
        )
    )
    if name == b"A2A-Version":
        return name, rng.choice(VERSIONS)
    if name == b"Host":
        value = rng.choice(
            (
                f"{target.agent}--{target.tenant}.localhost".encode(),
                b"nobody--nowhere.localhost",
                b"",
                b"\xff",
                b"127.0.0.1:1",
                b"a" * 300,
                b"[::1",
            )
        )
        return name, value
    if name == b"Last-Event-ID":
        task = rng.choice(target.all_tasks() or [nasty.uuid_like(rng)])
        return name, rng.choice(
            (
                f"{task}:1".encode(),
                f"{task}:-1".encode(),
                f"{task}:{2**70}".encode(),
                f"{nasty.uuid_like(rng)}:3".encode(),
                b"garbage",
                b":",
                b"",
                b"\xff",
            )
        )
    if name == b"Content-Encoding":
        return name, rng.choice((b"gzip", b"br", b"identity", b"x"))
    if name == b"Expect":
        return name, rng.choice((b"100-continue", b"teapot"))
    return name, _header_value(rng)


def _header_value(rng: random.Random) -> bytes:
    text = nasty.odd_string(rng)[:2_000]
    # Header values cannot hold CR, LF or NUL on the wire; other bytes go as they are.
    raw = text.encode("utf-8", "surrogatepass")
    return raw.replace(b"\r", b"").replace(b"\n", b"").replace(b"\x00", b"")


def path_segment(rng: random.Random, value: str) -> bytes:
    """`value` for a path: percent-encoded as a client should, or raw bytes as a careless one
    writes them (never a space, CR or LF: those end the request line)."""
    raw = value.encode("utf-8", "surrogatepass")
    if rng.random() < 0.8:
        return quote(raw, safe=rng.choice(("", ":", "/"))).encode()
    cleaned = bytes(b for b in raw if b not in b" \r\n\t")
    return cleaned or b"x"


def query(rng: random.Random, params: Iterable[tuple[str, str]]) -> bytes:
    """A query string: names and values percent-encoded (sometimes as raw bytes that are not
    UTF-8, sometimes not encoded at all)."""
    pairs = []
    for name, value in params:
        pairs.append(path_segment(rng, name) + b"=" + path_segment(rng, value))
    return b"&".join(pairs)


def odd_task_id(rng: random.Random, target: Target) -> str:
    """A task id: a real one (mostly), an unknown UUID, or an odd string."""
    roll = rng.random()
    tasks = target.all_tasks()
    if roll < 0.55 and tasks:
        return rng.choice(tasks)
    if roll < 0.7:
        unknown = nasty.uuid_like(rng)
        return unknown if rng.random() < 0.5 else unknown.replace("-", "")
    if roll < 0.78:
        return rng.choice(("x" * 200, "x" * 5_000, "1" * 64))
    return nasty.odd_string(rng)[:3_000] or "x"


def http_mutation(
    rng: random.Random, method: str, headers: Headers, body: bytes, target: Target
) -> tuple[str, Headers, bytes, str]:
    """One mutation of a request at the HTTP level; (method, headers, body, what)."""
    roll = rng.random()
    if roll < 0.15:
        return rng.choice(METHODS), headers, body, "HTTP method"
    if roll < 0.35:
        kept = [(n, v) for n, v in headers if n.lower() != b"content-type"]
        if rng.random() < 0.1:
            kept.append((b"Content-Type", rng.choice(MULTIPART)))
            return method, kept, body, "multipart Content-Type"
        if rng.random() < 0.2:
            return method, kept, body, "no Content-Type"
        kept.append((b"Content-Type", rng.choice(CONTENT_TYPES)))
        return method, kept, body, "Content-Type"
    if roll < 0.5:
        kept = [(n, v) for n, v in headers if n.lower() not in (b"x-api-key", b"authorization")]
        return method, kept + odd_auth(rng, target.key), body, "credentials"
    if roll < 0.75:
        extra = [odd_header(rng, target) for _ in range(rng.randint(1, 3))]
        what = "headers " + ", ".join(n.decode("latin-1") for n, _ in extra)
        return method, headers + extra, body, what
    if roll < 0.85:
        return (
            method,
            headers + [(b"Transfer-Encoding", b"chunked")],
            _chunked(body),
            "chunked",
        )
    if roll < 0.9:
        big = [(f"X-Big-{i}".encode(), b"v" * 8_000) for i in range(rng.choice((1, 3, 12)))]
        return method, headers + big, body, "large headers"
    if roll < 0.93:
        # Over the body limit (10 MiB by default): 413.
        return method, headers, body + b" " * (10 * 1024 * 1024 + 1), "body over the limit"
    if roll < 0.97:
        lying = [(n, v) for n, v in headers if n.lower() != b"content-length"]
        if body:
            # A Content-Length smaller than the body: the rest is a second, garbage request on
            # a connection the client closes; the first answer is judged.
            lying.append((b"Content-Length", str(rng.randrange(len(body))).encode()))
        return method, lying, body, "short Content-Length"
    return method, headers * 2, body, "every header twice"


def _chunked(body: bytes) -> bytes:
    chunks = [body[i : i + 1000] for i in range(0, len(body), 1000)]
    framed = b"".join(f"{len(c):x}\r\n".encode() + c + b"\r\n" for c in chunks)
    return framed + b"0\r\n\r\n"
