"""What a client of the cluster sees, written as a careful client behaves: a stream followed to
its task's end and resumed with `Last-Event-ID` whenever it is cut; a blocking send sent again
with the same `messageId` when its answer is lost; and what the database holds of the same
tasks, for the counts a trial makes (faults/suite.py).

Streams are A2A v1.0 JSON-RPC (`SendStreamingMessage`) over SSE through the front; each frame's
`id: <task>:<seq>` is how lost and repeated events are told.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg

TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
# Between two tries of a client: a front with no server up answers at once.
RETRY_PAUSE_SECONDS = 0.25


def message_id() -> str:
    return f"fault-{uuid.uuid4()}"


def send_params(text: str, mid: str, push: dict[str, str] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "message": {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": text}]}
    }
    if push:
        params["configuration"] = {"taskPushNotificationConfig": push}
    return params


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def state_of(result: dict[str, Any]) -> str:
    """The task state a v1.0 result or stream event carries, if any."""
    for key in ("task", "statusUpdate"):
        if key in result:
            return str(result[key].get("status", {}).get("state", ""))
    return str(result.get("status", {}).get("state", ""))


@dataclass
class Frame:
    event_id: str | None
    event: str | None
    data: Any


async def sse_frames(response: httpx.Response) -> AsyncIterator[Frame]:
    """The frames of an SSE response (comments and keep-alives skipped)."""
    event_id, event, data = None, None, []
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield Frame(event_id, event, json.loads("\n".join(data)))
            event_id, event, data = None, None, []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("event:"):
            event = line[6:].strip()


@dataclass
class Followed:
    """One streamed send as its client saw it, across every cut and resume.

    `seqs` are the event numbers of the frames received, in order. A frame carrying the whole
    task (the stream's opening, or a snapshot) stands for every event up to its number."""

    message_id: str
    task_id: str = ""
    seqs: list[int] = field(default_factory=list)
    snapshots: set[int] = field(default_factory=set)
    terminal: str = ""
    served_by: list[str] = field(default_factory=list)
    posts: int = 0  # requests made: the send, then each resume
    resends: int = 0  # the send made again (same messageId): its first try saw nothing
    errors: list[str] = field(default_factory=list)
    last_id: str | None = None  # the id of the last frame received: where a resume starts

    def lost_and_repeated(self) -> tuple[int, int]:
        """Events the client never saw (a gap before the next one it saw), and events it saw
        twice, by their numbers; a snapshot covers the events before it."""
        lost = repeated = 0
        last = 0
        for seq in self.seqs:
            if seq in self.snapshots:
                if seq < last:
                    repeated += 1
                last = max(last, seq)
            elif seq <= last:
                repeated += 1
            else:
                lost += seq - last - 1
                last = seq
        return lost, repeated


async def follow_send(
    http: httpx.AsyncClient,
    url: str,
    key: str,
    text: str,
    *,
    mid: str | None = None,
    push: dict[str, str] | None = None,
    deadline: float,
    followed: Followed | None = None,
) -> Followed:
    """Send `text` streaming, and follow the task to its end (or `deadline`, monotonic).

    A stream cut before the end is resumed by POSTing the same request with the last event's
    id as `Last-Event-ID`; a send that got no frame at all is made again as it was (the same
    messageId). What it sees goes into `followed` as it comes (one is made if none is given),
    so a caller can watch the stream's progress."""
    followed = followed or Followed(mid or message_id())
    body = rpc("SendStreamingMessage", send_params(text, followed.message_id, push))
    while time.monotonic() < deadline:
        headers = {"X-API-Key": key, "A2A-Version": "1.0"}
        if followed.last_id:
            headers["Last-Event-ID"] = followed.last_id
        elif followed.posts:
            followed.resends += 1
        followed.posts += 1
        try:
            # The deadline bounds the whole stream: keep-alives would keep a read going.
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                if await _read_stream(http, url, body, headers, followed):
                    return followed
        except TimeoutError:
            followed.errors.append("the deadline passed")
            return followed
        except httpx.HTTPError as exc:
            followed.errors.append(f"{type(exc).__name__}: {exc}"[:200])
        await asyncio.sleep(RETRY_PAUSE_SECONDS)
    return followed


async def _read_stream(
    http: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    followed: Followed,
) -> bool:
    """One POST of a followed stream, its frames noted in `followed`; True once the task's
    end arrived."""
    async with http.stream("POST", url, json=body, headers=headers) as response:
        followed.served_by.append(response.headers.get("x-served-by", "?"))
        if response.status_code != 200:
            text = (await response.aread())[:200].decode(errors="replace")
            followed.errors.append(f"HTTP {response.status_code}: {text}")
            return False
        async for frame in sse_frames(response):
            if frame.event == "error" or "error" in frame.data:
                followed.errors.append(f"error frame: {json.dumps(frame.data)[:200]}")
                return False
            result = frame.data.get("result", {})
            if frame.event_id:
                task_id, _, seq = frame.event_id.rpartition(":")
                followed.task_id, followed.last_id = task_id, frame.event_id
                followed.seqs.append(int(seq))
                if "task" in result:
                    followed.snapshots.add(int(seq))
            if state_of(result) in TERMINAL:
                followed.terminal = state_of(result)
                return True
    followed.errors.append("the stream ended before the task did")
    return False


@dataclass
class Sent:
    """A blocking send as its client saw it: the task its answer named, in what state."""

    message_id: str
    task_id: str = ""
    state: str = ""
    tries: int = 0
    served_by: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def blocking_send(
    http: httpx.AsyncClient, url: str, key: str, text: str, *, deadline: float
) -> Sent:
    """A blocking SendMessage, made again with the same messageId until an answer names a
    task (or `deadline`): a client whose answer was lost does not know whether it was sent."""
    sent = Sent(message_id())
    body = rpc("SendMessage", send_params(text, sent.message_id))
    while time.monotonic() < deadline:
        sent.tries += 1
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                response = await http.post(
                    url, json=body, headers={"X-API-Key": key, "A2A-Version": "1.0"}
                )
            sent.served_by.append(response.headers.get("x-served-by", "?"))
            answer = response.json() if response.status_code == 200 else {}
            task = answer.get("result", {}).get("task")
            if task:
                sent.task_id, sent.state = task["id"], state_of(task)
                return sent
            sent.errors.append(f"HTTP {response.status_code}: {response.text[:200]}")
        except TimeoutError:
            sent.errors.append("the deadline passed")
            return sent
        except (httpx.HTTPError, ValueError) as exc:
            sent.errors.append(f"{type(exc).__name__}: {exc}"[:200])
        await asyncio.sleep(RETRY_PAUSE_SECONDS)
    return sent


# --- the database's side -----------------------------------------------------------------------


class Ledger:
    """Reads of what PostgreSQL holds of the trials' tasks, each on a connection of its own
    (the server may have been restarted since the last one)."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url

    def _rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.database_url, autocommit=True, connect_timeout=5) as conn:
            return list(conn.execute(sql, params).fetchall())

    def task(self, task_id: str) -> tuple[str, int] | None:
        """(state, last event number), or None if there is no such task."""
        rows = self._rows("SELECT state, last_seq FROM tasks_app_task WHERE id = %s", task_id)
        return (str(rows[0][0]), int(rows[0][1])) if rows else None

    def repeated_runs(self, task_ids: list[str]) -> int:
        """How many runs of these (one-turn) tasks were started again: attempts past the first."""
        rows = self._rows(
            "SELECT coalesce(sum(attempt - 1), 0) FROM tasks_app_task WHERE id = ANY(%s)",
            [uuid.UUID(t) for t in task_ids],
        )
        return int(rows[0][0])

    def tasks_of_message(self, mid: str) -> list[str]:
        """The tasks whose history holds a user message with this messageId."""
        rows = self._rows(
            "SELECT DISTINCT task_id::text FROM tasks_app_message WHERE message_id = %s", mid
        )
        return [r[0] for r in rows]

    def step_artifacts(self, task_id: str) -> list[str]:
        """The artifact ids of the task's artifact events, in the order they were written."""
        rows = self._rows(
            "SELECT data FROM tasks_app_taskevent WHERE task_id = %s AND kind = "
            "'artifact_update' ORDER BY seq",
            task_id,
        )
        return [
            str(r[0].get("artifactUpdate", {}).get("artifact", {}).get("artifactId")) for r in rows
        ]

    def pushed_seqs(self, task_id: str, kinds: tuple[str, ...]) -> list[int]:
        rows = self._rows(
            "SELECT seq FROM tasks_app_taskevent WHERE task_id = %s AND kind = ANY(%s) "
            "ORDER BY seq",
            task_id,
            list(kinds),
        )
        return [int(r[0]) for r in rows]

    def status_text(self, task_id: str) -> str:
        """The text of the task's status message (why the platform failed it, say)."""
        rows = self._rows("SELECT status_message FROM tasks_app_task WHERE id = %s", task_id)
        message = rows[0][0] if rows and rows[0][0] else {}
        return " ".join(str(p.get("text", "")) for p in message.get("parts", []))

    def deliveries(self, task_id: str) -> list[tuple[int, str]]:
        """(event number, state) of each push delivery of the task's configs."""
        rows = self._rows(
            "SELECT d.seq, d.state FROM push_app_delivery d JOIN push_app_pushconfig c "
            "ON d.config_id = c.id WHERE c.task_id = %s ORDER BY d.seq",
            task_id,
        )
        return [(int(r[0]), str(r[1])) for r in rows]

    def failed_push_attempts(self, task_id: str) -> int:
        """POSTs of the task's push deliveries that did not deliver (to be retried, or dead)."""
        rows = self._rows(
            "SELECT count(*) FROM push_app_deliveryattempt a JOIN push_app_delivery d ON "
            "a.delivery_id = d.id JOIN push_app_pushconfig c ON d.config_id = c.id "
            "WHERE c.task_id = %s AND a.outcome <> 'delivered'",
            task_id,
        )
        return int(rows[0][0])

    def running_runners(self, task_ids: list[str]) -> dict[str, str]:
        """The worker (runner) holding each of these tasks that a worker runs now."""
        rows = self._rows(
            "SELECT id::text, runner FROM tasks_app_task WHERE id = ANY(%s::uuid[]) "
            "AND running_since IS NOT NULL",
            task_ids,
        )
        return {r[0]: str(r[1]) for r in rows}
