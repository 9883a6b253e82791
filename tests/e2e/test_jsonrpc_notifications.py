"""JSON-RPC requests without an `id` are notifications (JSON-RPC 2.0 section 4.1; the v0.3
specification, 6.11.1): the platform never answers one (HTTP 204, no body), whatever its
outcome, and runs it as it would have run the request. The 0.3 TCK expects an error answer to
two such requests; docs/conformance.md names that as the kit's deviation.

A send without an `id` is executed: a notification says the client has no interest in the
answer, not that it does not mean the call. Its task exists afterwards, and the client finds it
as it finds any of its tasks (ListTasks; v0.1 clients by the id they chose).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from .helpers import Target, message, result_of, rpc, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def echo(make_target) -> Target:
    return make_target()


def notify(http: httpx.Client, target: Target, method: str, params: Any, version: str) -> None:
    """POST a request without an `id`; it must be answered 204 with no body."""
    body = {"jsonrpc": "2.0", "method": method, "params": params}
    response = http.post(
        target.url,
        content=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "X-API-Key": target.key,
            **({"A2A-Version": version} if version else {}),
        },
    )
    assert response.status_code == 204, response.text
    assert response.content == b""


def listed(http: httpx.Client, target: Target) -> list[dict[str, Any]]:
    return result_of(rpc(http, target, "ListTasks", {}))["tasks"]


def test_the_kits_two_id_less_requests_get_no_answer_and_change_nothing(http, echo):
    """The 0.3 TCK's cases (tests/mandatory/jsonrpc/test_json_rpc_compliance.py:47-57): a
    method that does not exist, and message/send with params that are not a message."""
    notify(http, echo, "nonexistent/method", {}, "")
    notify(http, echo, "message/send", {"message": "not a message"}, "")
    notify(http, echo, "SendMessage", {"message": {"role": "ROLE_BOSS"}}, "1.0")
    assert listed(http, echo) == []


def test_an_id_less_send_is_executed_and_its_task_found_later(http, echo):
    # given sends without an id, in each dialect
    v10 = message("v1.0 notification")
    notify(http, echo, "SendMessage", {"message": v10}, "1.0")
    v03 = {
        "kind": "message",
        "messageId": str(uuid.uuid4()),
        "role": "user",
        "parts": [{"kind": "text", "text": "v0.3 notification"}],
    }
    notify(http, echo, "message/send", {"message": v03}, "0.3")
    v01_id = uuid.uuid4().hex
    v01 = {"role": "user", "parts": [{"type": "text", "text": "v0.1 notification"}]}
    notify(http, echo, "tasks/send", {"id": v01_id, "message": v01}, "0.1")

    # then each ran: its task is there, answered by the agent
    def completed() -> dict[str, str]:
        """The listed tasks by their first message's id, once all three have completed."""
        tasks = listed(http, echo)
        done = all(task["status"]["state"] == "TASK_STATE_COMPLETED" for task in tasks)
        by_message = {task["history"][0]["messageId"]: task["id"] for task in tasks}
        return by_message if done and len(tasks) == 3 else {}

    sent = wait_until(completed, what="the three tasks completed")
    assert len(sent) == 3 and {v10["messageId"], v03["messageId"]} <= set(sent)
    got = result_of(rpc(http, echo, "tasks/get", {"id": v01_id}, headers={"A2A-Version": "0.1"}))
    assert got["id"] == v01_id and got["status"]["state"] == "completed"
