"""JSON-RPC cases: a valid request of one dialect (v1.0, v0.3, v0.1) and one method, then
mutated: its params, its envelope, its bytes, or its HTTP request; or batched, or sent as a
notification."""

from __future__ import annotations

import random
from typing import Any
from urllib.parse import quote

from . import nasty
from .http_cases import JSON, VERSIONS, Headers, auth, http_mutation, odd_task_id
from .target import Target
from .wire import HttpCase

PUSH_URL = "http://127.0.0.1:9/fuzz-push"  # the discard port: nothing is ever delivered there


def message_v10(rng: random.Random, target: Target) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": nasty.uuid_like(rng),
        "role": "ROLE_USER",
        "parts": [{"text": "fuzz"}],
    }
    roll = rng.random()
    if roll < 0.2:
        message["parts"].append({"data": {"k": [1, 2]}, "mediaType": "application/json"})
    elif roll < 0.3:
        message["parts"].append({"raw": "aGVsbG8=", "filename": "a.txt", "mediaType": "text/plain"})
    elif roll < 0.4:
        message["parts"].append({"url": "http://127.0.0.1:9/f", "filename": "f"})
    if rng.random() < 0.3 and target.context_ids:
        message["contextId"] = rng.choice(target.context_ids)
    if rng.random() < 0.15 and target.tasks.get("1.0"):
        message["taskId"] = rng.choice(target.tasks["1.0"])
    if rng.random() < 0.2:
        message["metadata"] = {"a": 1, "b": [None, "x"]}
    return message


def message_v03(rng: random.Random, target: Target) -> dict[str, Any]:
    message: dict[str, Any] = {
        "kind": "message",
        "messageId": nasty.uuid_like(rng),
        "role": "user",
        "parts": [{"kind": "text", "text": "fuzz"}],
    }
    roll = rng.random()
    if roll < 0.2:
        message["parts"].append({"kind": "data", "data": {"k": 1}})
    elif roll < 0.3:
        message["parts"].append(
            {"kind": "file", "file": {"bytes": "aGVsbG8=", "mimeType": "text/plain"}}
        )
    if rng.random() < 0.3 and target.context_ids:
        message["contextId"] = rng.choice(target.context_ids)
    if rng.random() < 0.15 and target.tasks.get("0.3"):
        message["taskId"] = rng.choice(target.tasks["0.3"])
    return message


def _v10(rng: random.Random, target: Target) -> tuple[str, dict[str, Any]]:
    task = odd_task_id(rng, target) if rng.random() < 0.3 else _task(rng, target, "1.0")
    tenant = {"tenant": target.agent_path} if rng.random() < 0.3 else {}
    send: dict[str, Any] = {"message": message_v10(rng, target), **tenant}
    if rng.random() < 0.4:
        send["configuration"] = {
            "acceptedOutputModes": ["text/plain"],
            "historyLength": rng.choice((0, 1, 5)),
            "returnImmediately": rng.random() < 0.5,
        }
        if rng.random() < 0.3:
            send["configuration"]["taskPushNotificationConfig"] = {
                "url": PUSH_URL,
                "authentication": {"scheme": "Bearer", "credentials": "c"},
            }
    config = {"taskId": task, "id": target.config_id, **tenant}
    listing: dict[str, Any] = {"pageSize": 5, "status": "TASK_STATE_COMPLETED", **tenant}
    if rng.random() < 0.5:
        listing["pageToken"] = nasty.page_token(rng, target.page_token)
    if rng.random() < 0.3:
        listing["statusTimestampAfter"] = "2020-01-01T00:00:00Z"
    templates: dict[str, dict[str, Any]] = {
        "SendMessage": send,
        "SendStreamingMessage": send,
        "GetTask": {"id": task, "historyLength": 2, **tenant},
        "ListTasks": listing,
        "CancelTask": {"id": task, **tenant},
        "SubscribeToTask": {"id": task, **tenant},
        "GetExtendedAgentCard": {**tenant},
        "CreateTaskPushNotificationConfig": {
            **config,
            "url": PUSH_URL,
            "token": "t",
            "authentication": {"scheme": "Bearer", "credentials": "c"},
        },
        "GetTaskPushNotificationConfig": config,
        "ListTaskPushNotificationConfigs": {"taskId": task, "pageSize": 2, **tenant},
        "DeleteTaskPushNotificationConfig": config,
    }
    method = rng.choice(sorted(templates))
    return method, templates[method]


def _v03(rng: random.Random, target: Target) -> tuple[str, dict[str, Any]]:
    task = odd_task_id(rng, target) if rng.random() < 0.3 else _task(rng, target, "0.3")
    send: dict[str, Any] = {"message": message_v03(rng, target)}
    if rng.random() < 0.4:
        send["configuration"] = {
            "acceptedOutputModes": ["text/plain"],
            "historyLength": rng.choice((0, 1, 5)),
            "blocking": rng.random() < 0.5,
        }
        if rng.random() < 0.3:
            send["configuration"]["pushNotificationConfig"] = {
                "url": PUSH_URL,
                "authentication": {"schemes": ["Bearer"], "credentials": "c"},
            }
    listing: dict[str, Any] = {"pageSize": 3, "status": "completed"}
    if rng.random() < 0.5:
        listing["pageToken"] = nasty.page_token(rng, target.page_token)
    if rng.random() < 0.3:
        listing["lastUpdatedAfter"] = 1577836800000
    templates: dict[str, dict[str, Any]] = {
        "message/send": send,
        "message/stream": send,
        "tasks/get": {"id": task, "historyLength": 1},
        "tasks/list": listing,
        "tasks/cancel": {"id": task},
        "task/cancel": {"id": task},
        "tasks/resubscribe": {"id": task},
        "agent/getAuthenticatedExtendedCard": {},
        "tasks/pushNotificationConfig/set": {
            "taskId": task,
            "pushNotificationConfig": {"url": PUSH_URL, "id": target.config_id, "token": "t"},
        },
        "tasks/pushNotificationConfig/get": {"id": task, "pushNotificationConfigId": "c"},
        "tasks/pushNotificationConfig/list": {"id": task},
        "tasks/pushNotificationConfig/delete": {"id": task, "pushNotificationConfigId": "c"},
    }
    method = rng.choice(sorted(templates))
    return method, templates[method]


def _v01(rng: random.Random, target: Target) -> tuple[str, dict[str, Any]]:
    task = odd_task_id(rng, target) if rng.random() < 0.3 else _task(rng, target, "0.1")
    send: dict[str, Any] = {
        "id": nasty.uuid_like(rng).replace("-", "") if rng.random() < 0.7 else task,
        "message": {"role": "user", "parts": [{"type": "text", "text": "fuzz"}]},
    }
    if rng.random() < 0.3:
        send["sessionId"] = rng.choice(target.context_ids or ["s1"])
    if rng.random() < 0.3:
        send["historyLength"] = rng.choice((0, 1, 3))
    if rng.random() < 0.2:
        send["message"]["parts"].append({"type": "data", "data": {"k": 1}})
    if rng.random() < 0.1:
        send["pushNotification"] = {"url": PUSH_URL, "headers": {"X-Token": "t"}}
    templates: dict[str, dict[str, Any]] = {
        "tasks/send": send,
        "tasks/sendSubscribe": send,
        "tasks/get": {"id": task, "historyLength": 1},
        "tasks/cancel": {"id": task},
        "tasks/resubscribe": {"id": task},
        "agent/getCard": {},
        "tasks/pushNotification/set": {"id": task, "url": PUSH_URL, "headers": {"X-T": "1"}},
        "tasks/pushNotification/get": {"id": task},
    }
    method = rng.choice(sorted(templates))
    return method, templates[method]


def _task(rng: random.Random, target: Target, dialect: str) -> str:
    own = target.tasks.get(dialect) or target.all_tasks()
    return rng.choice(own) if own else nasty.uuid_like(rng)


TEMPLATES = {"1.0": _v10, "0.3": _v03, "0.1": _v01}
# Method names that are not the dialect's, or not A2A's at all.
ODD_METHODS = (
    "",
    "SendMessage ",
    "sendmessage",
    "message/send/",
    "rpc.discover",
    "tasks/send",
    "GetTask",
    "tasks/get",
    "\x00",
    "\ud800",
    "a" * 5_000,
)


def _version_headers(rng: random.Random, dialect: str) -> tuple[Headers, bytes]:
    """The headers and the query that say the dialect, in the ways a client may say it."""
    if dialect == "1.0":
        if rng.random() < 0.2:
            return [], b"?A2A-Version=1.0"
        return [(b"A2A-Version", rng.choice((b"1.0", b"1.0.0", b"1")))], b""
    if dialect == "0.1":
        return ([(b"A2A-Version", b"0.1")] if rng.random() < 0.8 else []), b""
    return ([(b"A2A-Version", b"0.3")] if rng.random() < 0.3 else []), b""


def jsonrpc_case(rng: random.Random, target: Target) -> HttpCase:
    dialect = rng.choice(("1.0", "1.0", "0.3", "0.3", "0.1"))
    method, params = TEMPLATES[dialect](rng, target)
    request_id: Any = rng.choice((1, rng.randint(2, 10**6), "req-1", nasty.uuid_like(rng)))
    envelope: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": params,
    }
    version_headers, query = _version_headers(rng, dialect)
    headers: Headers = [(b"Content-Type", JSON), *version_headers, *auth(rng, target.key)]
    what = f"{method}"
    http_method = "POST"
    roll = rng.random()
    if roll < 0.08:
        body = nasty.encode(rng, envelope)
        what += ": valid"
    elif roll < 0.5:
        mutated, done = nasty.mutate(rng, params)
        envelope["params"] = mutated
        body = nasty.encode(rng, envelope)
        what += ": params " + "; ".join(done)
    elif roll < 0.62:
        body, change = _envelope_mutation(rng, envelope)
        what += f": envelope {change}"
    elif roll < 0.7:
        body, change = _batch(rng, target, dialect, envelope)
        what += f": batch {change}"
    elif roll < 0.75:
        del envelope["id"]
        if rng.random() < 0.5:
            envelope["params"], _ = nasty.mutate(rng, params)
        body = nasty.encode(rng, envelope)
        what += ": notification"
    elif roll < 0.85:
        body, change = nasty.body_mutation(rng, nasty.encode(rng, envelope))
        what += f": body {change}"
    elif roll < 0.9:
        body = nasty.encode(rng, envelope)
        query, change = _odd_query(rng)
        what += f": {change}"
    else:
        body = nasty.encode(rng, envelope)
        http_method, headers, body, change = http_mutation(rng, http_method, headers, body, target)
        what += f": {change}"
    url = target.root.encode()
    if rng.random() < 0.1:
        url = url.rstrip(b"/")  # the agent's URL without its slash is JSON-RPC too
    # Another Host may name an agent by its own host name: the path is then that agent's, and
    # the answer the REST binding's or JSON-RPC's.
    moved = any(name.lower() == b"host" for name, _ in headers)
    return HttpCase(
        binding="any" if moved else "jsonrpc",
        dialect=dialect,
        what=f"v{dialect} {what}",
        method=http_method,
        target=url + query,
        headers=tuple(headers),
        body=body,
    )


def _odd_query(rng: random.Random) -> tuple[bytes, str]:
    """A query string the JSON-RPC endpoint must read past: versions, many parameters."""
    roll = rng.random()
    if roll < 0.5:
        version = rng.choice(VERSIONS)
        return b"?A2A-Version=" + quote(version, safe="").encode(), "A2A-Version in the query"
    if roll < 0.7:
        return b"?A2A-Version=1.0&A2A-Version=0.3", "A2A-Version twice in the query"
    if roll < 0.85:
        return b"?" + b"&".join(b"p%d=v" % i for i in range(1_100)), "1,100 query parameters"
    return b"?" + rng.choice((b"%", b"%zz", b"&&&", b"=", b"a=%00", b"a=%ff")), "odd query"


def _envelope_mutation(rng: random.Random, envelope: dict[str, Any]) -> tuple[bytes, str]:
    envelope = dict(envelope)
    roll = rng.random()
    if roll < 0.25:
        envelope["id"] = rng.choice(
            (None, 1.5, True, [], {}, "", "\ud800", 2**70, -(2**63), "x" * 10_000)
        )
        change = "odd id"
    elif roll < 0.4:
        envelope["jsonrpc"] = rng.choice(("1.0", "2", 2.0, None, "", "2.0 "))
        change = "jsonrpc version"
    elif roll < 0.6:
        envelope["method"] = rng.choice((*ODD_METHODS, None, 1, [], {}))
        change = "method"
    elif roll < 0.8:
        envelope["params"] = rng.choice((None, [], [1, 2], "params", 0, True, nasty.deep(rng)))
        change = "params not an object"
    else:
        key = rng.choice(("jsonrpc", "method", "params", "id"))
        envelope.pop(key, None)
        change = f"no {key}"
    return nasty.encode(rng, envelope), change


def _batch(
    rng: random.Random, target: Target, dialect: str, first: dict[str, Any]
) -> tuple[bytes, str]:
    roll = rng.random()
    if roll < 0.1:
        return b"[]", "empty"
    if roll < 0.2:
        return nasty.encode(rng, [first] * 51), "over the limit"
    items: list[Any] = [first]
    for _ in range(rng.randint(1, 4)):
        method, params = TEMPLATES[dialect](rng, target)
        item: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if rng.random() < 0.8:
            item["id"] = rng.randint(1, 1000)
        if rng.random() < 0.3:
            item["params"], _ = nasty.mutate(rng, params)
        items.append(item)
    if rng.random() < 0.3:
        items.append(nasty.odd_value(rng))
    return nasty.encode(rng, items), f"of {len(items)}"
