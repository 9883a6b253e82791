"""REST cases: an operation of v1.0 (under the agent's URL) or v0.3 (under its `v1/`, in each
wire spelling), made valid, then mutated: its body, its path, its query, or its HTTP request."""

from __future__ import annotations

import random
from typing import Any

from . import nasty
from .http_cases import (
    JSON,
    Headers,
    auth,
    http_mutation,
    odd_header,
    odd_task_id,
    path_segment,
    query,
)
from .jsonrpc_cases import PUSH_URL, message_v03, message_v10
from .target import Target
from .wire import HttpCase

# (HTTP method, path under the dialect's root, operation); {task} and {config} filled in.
V10_OPERATIONS = (
    ("POST", "message:send", "send"),
    ("POST", "message:stream", "send"),
    ("GET", "tasks", "list"),
    ("GET", "tasks/{task}", "get"),
    ("POST", "tasks/{task}:cancel", "cancel"),
    ("GET", "tasks/{task}:subscribe", "subscribe"),
    ("POST", "tasks/{task}:subscribe", "subscribe"),
    ("GET", "tasks/{task}/pushNotificationConfigs", "push-list"),
    ("POST", "tasks/{task}/pushNotificationConfigs", "push-create"),
    ("GET", "tasks/{task}/pushNotificationConfigs/{config}", "push-get"),
    ("DELETE", "tasks/{task}/pushNotificationConfigs/{config}", "push-delete"),
    ("GET", "extendedAgentCard", "card"),
)
V03_OPERATIONS = (
    *V10_OPERATIONS,
    ("GET", "tasks/{task}:resubscribe", "subscribe"),
    ("POST", "tasks/{task}:resubscribe", "subscribe"),
    ("GET", "card", "card"),
)
# Paths the REST roots do not have: unknown actions, case, extra segments, dot segments.
ODD_PATHS = (
    "",
    "message:sendd",
    "Message:send",
    "message",
    "message:send/",
    "tasks/",
    "tasks//x",
    "tasks/{task}:explode",
    "tasks/{task}:cancel:cancel",
    "tasks/{task}/",
    "tasks/{task}/pushNotificationConfigs/",
    "tasks/{task}/pushNotificationConfigs/{config}/x",
    "tasks/{task};x=1",
    "tasks/../tasks/{task}",
    "./tasks",
    "v1/v1/tasks",
    "v2/tasks",
    ".well-known/agent-card.json/x",
    "%2e%2e/%2e%2e/admin/",
    "tasks/%00",
    "tasks/%ff%fe",
    "tasks/%C0%AF",
    "tasks/%zz",
)
SPELLINGS = ("proto-json", "json", "draft", "mapping", "", "JSON", "x", "\x00")


def _send_body(rng: random.Random, target: Target, dialect: str) -> tuple[Any, str]:
    """A send's body in the dialect, and for v0.3 in one of its spellings."""
    if dialect == "1.0":
        body: dict[str, Any] = {"message": message_v10(rng, target)}
        if rng.random() < 0.3:
            body["configuration"] = {"returnImmediately": rng.random() < 0.5, "historyLength": 1}
        if rng.random() < 0.2:
            body["tenant"] = target.agent_path
        return body, ""
    spelling = rng.choice(("proto-json", "json", "draft"))
    message_id = nasty.uuid_like(rng)
    if spelling == "json":
        return {"message": message_v03(rng, target)}, spelling
    if spelling == "draft":
        message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "fuzz"}]}
        return {"message": message}, spelling
    message = {"messageId": message_id, "role": "ROLE_USER", "content": [{"text": "fuzz"}]}
    body = {"message": message}
    if rng.random() < 0.3:
        body["configuration"] = {"blocking": rng.random() < 0.5, "historyLength": 2}
    return body, spelling


def _push_body(rng: random.Random, target: Target, dialect: str, task: str) -> Any:
    config: dict[str, Any] = {"url": PUSH_URL, "id": target.config_id, "token": "t"}
    if rng.random() < 0.4:
        scheme = {"scheme": "Bearer"} if dialect == "1.0" else {"schemes": ["Bearer"]}
        config["authentication"] = {**scheme, "credentials": "c"}
    if dialect == "1.0":
        return {**config, "taskId": task} if rng.random() < 0.5 else config
    shape = rng.choice(("proto-json", "json", "draft", "draft-bare"))
    if shape == "proto-json":
        return {"parent": f"tasks/{task}", "config": {"pushNotificationConfig": config}}
    if shape == "json":
        return {"taskId": task, "pushNotificationConfig": config}
    if shape == "draft":
        name = f"tasks/{task}/pushNotificationConfigs/{target.config_id}"
        return {"name": name, "pushNotificationConfig": config}
    return {"pushNotificationConfig": config}


def _query_params(
    rng: random.Random, target: Target, dialect: str, operation: str
) -> list[tuple[str, str]]:
    """Valid query parameters of the operation (some of them, in a random order)."""
    params: list[tuple[str, str]] = []
    if operation == "list":
        options = [
            ("pageSize", str(rng.choice((1, 5, 100)))),
            ("historyLength", str(rng.choice((0, 2)))),
            ("includeArtifacts", rng.choice(("true", "false"))),
            ("status", "TASK_STATE_COMPLETED" if dialect == "1.0" else "completed"),
            ("pageToken", nasty.page_token(rng, target.page_token)),
        ]
        if dialect == "1.0":
            options.append(("statusTimestampAfter", "2020-01-01T00:00:00Z"))
        else:
            options.append(("lastUpdatedAfter", "1577836800000"))
        params += rng.sample(options, rng.randint(0, len(options)))
    elif operation == "get":
        if rng.random() < 0.5:
            params.append(("historyLength", str(rng.choice((0, 1, 10)))))
    elif operation == "push-list":
        if rng.random() < 0.5:
            params.append(("pageSize", "2"))
    if dialect == "0.3" and rng.random() < 0.3:
        params.append(("spelling", rng.choice(SPELLINGS[:4])))
    if rng.random() < 0.1:
        params.append(("A2A-Version", dialect))
    return params


def _odd_query(
    rng: random.Random, params: list[tuple[str, str]]
) -> tuple[list[tuple[str, str]], str]:
    roll = rng.random()
    names = (
        "pageSize",
        "historyLength",
        "includeArtifacts",
        "status",
        "pageToken",
        "statusTimestampAfter",
        "lastUpdatedAfter",
        "contextId",
        "tenant",
        "spelling",
        "configId",
        "A2A-Version",
        "page_size",
    )
    if roll < 0.6:
        name = rng.choice(names)
        value = rng.choice(
            (
                nasty.odd_string(rng)[:500],
                str(rng.choice(nasty.ODD_NUMBERS)),
                "1e3",
                "0x10",
                " 5",
                "-0",
                "TRUE",
                "1970-01-01",
                "9999-12-31T23:59:59Z",
                "0000-00-00T00:00:00Z",
                rng.choice(SPELLINGS),
            )
        )
        return [*params, (name, value)], f"query {name}"
    if roll < 0.75:
        name = rng.choice(names)
        return [*params, (name, "1"), (name, "2")], f"query {name} twice"
    if roll < 0.85:
        return [*params, *((f"p{i}", "v") for i in range(1_100))], "1,100 query parameters"
    return [*params, (nasty.odd_string(rng)[:100], "v")], "odd query name"


def rest_case(rng: random.Random, target: Target) -> HttpCase:
    dialect = rng.choice(("1.0", "0.3"))
    operations = V10_OPERATIONS if dialect == "1.0" else V03_OPERATIONS
    method, route, operation = rng.choice(operations)
    task = odd_task_id(rng, target) if rng.random() < 0.25 else _real_task(rng, target)
    config = target.config_id if rng.random() < 0.7 else nasty.odd_string(rng)[:300] or "c"
    body: Any = None
    spelling = ""
    if operation == "send":
        body, spelling = _send_body(rng, target, dialect)
    elif operation == "push-create":
        body = _push_body(rng, target, dialect, task)
    elif operation == "cancel" and rng.random() < 0.3:
        body = {"id": task} if dialect == "1.0" else {"name": f"tasks/{task}"}
    params = _query_params(rng, target, dialect, operation)
    headers: Headers = [*auth(rng, target.key)]
    if body is not None or (method == "POST" and rng.random() < 0.5):
        headers.append((b"Content-Type", rng.choice((JSON, b"application/a2a+json"))))
    if rng.random() < 0.1:
        headers.append((b"A2A-Version", dialect.encode()))
    what = f"{method} {route}" + (f" ({spelling})" if spelling else "")
    raw_body = b"" if body is None else nasty.encode(rng, body)
    path_task, path_config = path_segment(rng, task), path_segment(rng, config)
    roll = rng.random()
    if roll < 0.1:
        what += ": valid"
    elif roll < 0.4 and body is not None:
        mutated, done = nasty.mutate(rng, body)
        raw_body = nasty.encode(rng, mutated)
        what += ": body " + "; ".join(done)
    elif roll < 0.5:
        raw_body, change = nasty.body_mutation(rng, raw_body or b"{}")
        if not any(name.lower() == b"content-type" for name, _ in headers):
            headers.append((b"Content-Type", JSON))
        what += f": body {change}"
    elif roll < 0.65:
        params, change = _odd_query(rng, params)
        what += f": {change}"
    elif roll < 0.75:
        route = rng.choice(ODD_PATHS)
        what = f"{method} {route}: unknown path"
    elif roll < 0.8:
        headers += [odd_header(rng, target) for _ in range(rng.randint(1, 3))]
        what += ": odd headers"
    elif roll < 0.84:
        path_task = b"x" * rng.choice((17_000, 70_000))
        what += ": URL over 16 KB"
    else:
        method, headers, raw_body, change = http_mutation(rng, method, headers, raw_body, target)
        what += f": {change}"
    root = target.root + ("v1/" if dialect == "0.3" else "")
    path = root.encode() + route.encode().replace(b"{task}", path_task).replace(
        b"{config}", path_config
    )
    if params:
        path += b"?" + query(rng, params)
    # The v1.0 root itself is the JSON-RPC endpoint, and another Host may make the path
    # another agent's: then JSON-RPC's answers are as right as REST's.
    at_root = path.split(b"?")[0].rstrip(b"/") == target.root.encode().rstrip(b"/")
    moved = any(name.lower() == b"host" for name, _ in headers)
    return HttpCase(
        binding="any" if at_root or moved else "rest",
        dialect=dialect,
        what=f"REST v{dialect} {what}",
        method=method,
        target=path,
        headers=tuple(headers),
        body=raw_body,
    )


def _real_task(rng: random.Random, target: Target) -> str:
    tasks = target.all_tasks()
    return rng.choice(tasks) if tasks else nasty.uuid_like(rng)
