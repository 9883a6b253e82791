"""Console task pages: the task list (filters, keyset pages, counts by state), one task's page
(status, history, artifacts, event timeline, what people did to it from the console) and the
live event stream that page follows."""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from typing import Any, TypedDict
from urllib.parse import urlsplit

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.utils.http import urlencode

from a2a_platform.metrics import SSE_STREAMS_OPEN
from agents.models import Agent
from bindings.sse import KEEP_ALIVE, sse_frame
from tasks_app.errors import InvalidParamsError
from tasks_app.models import INTERRUPTED_STATES, STATE_CHOICES, TERMINAL_STATES, Task, TaskEvent
from tasks_app.streams import EventFollower

from .forms import pretty_json
from .scoping import can_manage
from .selectors import (
    agent_list,
    agent_path,
    task_action_list,
    task_detail_get,
    task_event_rows,
    task_get_or_404,
    task_page_get,
    task_state_counts,
)

PAGE_SIZE = 50
# A task page shows the newest events only: an agent streaming many chunks must not make the
# page unusable. The live stream continues after the newest one either way.
EVENTS_SHOWN = 500
# The newest console actions a task page lists (a task sees a few: each is a person's click).
ACTIONS_SHOWN = 100
SUMMARY_LENGTH = 140
_DATETIME_LOCAL = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f"]
_DATETIME_ERROR = "Enter a date and time like 2025-01-31T14:30 (UTC)."


# --- the task list -------------------------------------------------------------------------


class TaskFilterForm(forms.Form):
    """The list's filters, read from the query string. The agent is a choice among the agents
    the user may see, so an error never echoes (or confirms) another tenant's names."""

    agent = forms.ChoiceField(
        required=False,
        error_messages={
            "invalid_choice": "not an agent you can see; pick one from the list "
            "(values look like <tenant>/<agent>)."
        },
    )
    state = forms.ChoiceField(
        required=False,
        choices=[("", "any state"), *STATE_CHOICES],
        error_messages={
            "invalid_choice": "%(value)s is not a task state; pick one from the list "
            "(e.g. TASK_STATE_COMPLETED)."
        },
    )
    context = forms.CharField(required=False, max_length=200, label="Context id")
    since = forms.DateTimeField(
        required=False,
        label="Updated since",
        input_formats=_DATETIME_LOCAL,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        error_messages={"invalid": _DATETIME_ERROR},
    )
    until = forms.DateTimeField(
        required=False,
        label="Updated before",
        input_formats=_DATETIME_LOCAL,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        error_messages={"invalid": _DATETIME_ERROR},
    )

    def __init__(self, data: Any, *, agents: Iterable[Agent]) -> None:
        super().__init__(data)
        self.agents = {agent_path(a): a for a in agents}
        self.fields["agent"].choices = [("", "all agents"), *((p, p) for p in self.agents)]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since >= until:
            self.add_error("until", "must be later than 'Updated since'.")
        return cleaned

    def problems(self) -> list[str]:
        """Each error as one line naming the field as the page and its URL do."""
        return [
            f"{self.fields[name].label or name.title()} ({name}): {error}"
            for name, errors in self.errors.items()
            for error in errors
        ]

    def selected_agent(self) -> Agent | None:
        path = self.cleaned_data.get("agent") if hasattr(self, "cleaned_data") else None
        return self.agents.get(path) if path else None


def _filter_query(request: HttpRequest, **extra: str) -> str:
    """The query string of the current filters (only the known ones), plus `extra`."""
    params = {k: request.GET[k] for k in TaskFilterForm.base_fields if request.GET.get(k)}
    params.update(extra)
    return urlencode(params)


@login_required
def task_list(request: HttpRequest) -> HttpResponse:
    form = TaskFilterForm(request.GET, agents=agent_list(user=request.user))
    valid = form.is_valid()
    problems = form.problems()
    agent = form.selected_agent()

    after = request.GET.get("after", "")
    page: list[Task] = []
    next_query = ""
    if valid:
        data = form.cleaned_data
        try:
            # The page link carries ListTasks' own page token (tasks_app.selectors).
            found = task_page_get(
                user=request.user,
                agent=agent,
                state=data.get("state") or "",
                context_id=data.get("context") or "",
                since=data.get("since"),
                until=data.get("until"),
                after=after,
                size=PAGE_SIZE,
            )
        except InvalidParamsError:
            problems.append(
                "Page (after): this is not a page link this console made; start again from "
                "the first page."
            )
        else:
            page = found["tasks"]
            if found["next_after"]:
                next_query = _filter_query(request, after=found["next_after"])

    counts = task_state_counts(user=request.user, agent=agent)
    return render(
        request,
        "console/tasks.html",
        {
            "form": form,
            "problems": problems,
            "tasks": page,
            "paged": bool(after),
            "next_query": next_query,
            "first_query": _filter_query(request),
            "counts": counts,
            "counts_total": sum(n for _, n in counts),
            "counts_agent": agent_path(agent) if agent else "",
            "valid": valid,
            "page_size": PAGE_SIZE,
        },
    )


# --- one task ------------------------------------------------------------------------------


class PartView(TypedDict, total=False):
    kind: str  # text, data, file, url or unknown
    text: str
    json: str
    filename: str
    media_type: str
    size: int
    url: str
    is_link: bool


def _b64_size(value: str) -> int:
    return len(value.rstrip("=")) * 3 // 4


def _is_web_url(url: str) -> bool:
    try:
        return urlsplit(url).scheme.lower() in ("http", "https")
    except ValueError:
        return False


def part_view(part: Any) -> PartView:
    """One proto-JSON Part, ready for the template (which escapes every value)."""
    if not isinstance(part, dict):
        return {"kind": "unknown", "json": pretty_json(part)}
    common: PartView = {
        "filename": str(part.get("filename", "")),
        "media_type": str(part.get("mediaType", "")),
    }
    if "text" in part:
        return {**common, "kind": "text", "text": str(part["text"])}
    if "data" in part:
        return {**common, "kind": "data", "json": pretty_json(part["data"])}
    if "raw" in part:
        return {**common, "kind": "file", "size": _b64_size(str(part["raw"]))}
    if "url" in part:
        url = str(part["url"])
        return {**common, "kind": "url", "url": url, "is_link": _is_web_url(url)}
    return {**common, "kind": "unknown", "json": pretty_json(part)}


def parts_view(parts: Any) -> list[PartView]:
    return [part_view(p) for p in parts] if isinstance(parts, list) else []


def _short_text(parts: Any) -> str:
    """The parts as one line: text as is, anything else as a [tag]."""
    pieces = []
    for part in parts if isinstance(parts, list) else []:
        view = part_view(part)
        if view["kind"] == "text":
            pieces.append(view["text"])
        elif view["kind"] == "data":
            pieces.append("[data]")
        else:
            pieces.append(f"[{view['kind']}{' ' + view['filename'] if view['filename'] else ''}]")
    line = re.sub(r"\s+", " ", " ".join(pieces)).strip()
    return line if len(line) <= SUMMARY_LENGTH else line[: SUMMARY_LENGTH - 1] + "…"


def _dict_at(data: Any, *keys: str) -> dict[str, Any]:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def event_summary(data: Any) -> str:
    """One line about a StreamResponse (v1.0 JSON), for the timeline."""
    if not isinstance(data, dict):
        return "(not a stream response)"
    if "task" in data:
        status = _dict_at(data, "task", "status")
        text = _short_text(_dict_at(status, "message").get("parts"))
        return f"Task {status.get('state', '?')}" + (f": {text}" if text else "")
    if "statusUpdate" in data:
        status = _dict_at(data, "statusUpdate", "status")
        text = _short_text(_dict_at(status, "message").get("parts"))
        return f"Status {status.get('state', '?')}" + (f": {text}" if text else "")
    if "artifactUpdate" in data:
        update = _dict_at(data, "artifactUpdate")
        artifact = _dict_at(update, "artifact")
        name = artifact.get("name") or artifact.get("artifactId") or "?"
        flags = [f for f in ("append", "lastChunk") if update.get(f)]
        text = _short_text(artifact.get("parts"))
        return (
            f"Artifact {name}"
            + (f" ({', '.join(flags)})" if flags else "")
            + (f": {text}" if text else "")
        )
    if "message" in data:
        message = _dict_at(data, "message")
        text = _short_text(message.get("parts"))
        return f"Message from {message.get('role', '?')}" + (f": {text}" if text else "")
    return "(empty event)"


class EventView(TypedDict):
    seq: int
    kind: str
    state: str
    created_at: datetime
    summary: str
    raw: str


def _event_view(event: TaskEvent) -> EventView:
    return {
        "seq": event.seq,
        "kind": event.kind,
        "state": event.state,
        "created_at": event.created_at,
        "summary": event_summary(event.data),
        "raw": pretty_json(event.data),
    }


def usage_summary(usage: Any) -> str:
    """The token usage a model agent put in the task's metadata (`openai` kind), in words:
    "gpt-4o-mini: 12 prompt + 30 completion = 42 tokens"; '' when there is none."""
    if not isinstance(usage, dict):
        return ""
    # Metadata passes through protobuf's Struct, where every number is a double: 12 is 12.0.
    counts = [usage.get(k) for k in ("promptTokens", "completionTokens", "totalTokens")]
    if not all(isinstance(n, int | float) and float(n).is_integer() for n in counts):
        return ""
    prompt, completion, total = (int(n) for n in counts)
    model = usage.get("model")
    words = f"{prompt} prompt + {completion} completion = {total} tokens"
    return f"{model}: {words}" if isinstance(model, str) and model else words


@login_required
def task_detail(request: HttpRequest, tenant_slug: str, task_id: str) -> HttpResponse:
    task = task_get_or_404(user=request.user, tenant_slug=tenant_slug, task_id=task_id)
    detail = task_detail_get(task=task, events_shown=EVENTS_SHOWN)
    history = [
        {"role": m.role, "message_id": m.message_id, "parts": parts_view(m.data.get("parts"))}
        for m in detail["messages"]
    ]
    artifacts = [
        {
            "artifact_id": a.artifact_id,
            "name": a.data.get("name", ""),
            "description": a.data.get("description", ""),
            "parts": parts_view(a.data.get("parts")),
        }
        for a in detail["artifacts"]
    ]
    events = [_event_view(e) for e in detail["events"]]
    status_message = task.status_message or {}
    return render(
        request,
        "console/task.html",
        {
            "task": task,
            "tenant": task.tenant,
            "status_parts": parts_view(status_message.get("parts")),
            "metadata": pretty_json(task.metadata) if task.metadata else "",
            "usage": usage_summary(task.metadata.get("usage")),
            "history": history,
            "artifacts": artifacts,
            "events": events,
            "events_hidden": events[0]["seq"] - 1 if events else 0,
            "last_seq": events[-1]["seq"] if events else 0,
            "terminal_states": " ".join(sorted(TERMINAL_STATES)),
            "interrupted_states": " ".join(sorted(INTERRUPTED_STATES)),
            "awaiting_input": task.state in INTERRUPTED_STATES,
            # Cancel and reply act as the person logged in (console.views_actions), for those
            # who manage the tenant; a disabled agent's task can still be canceled, not replied
            # to.
            "can_act": can_manage(request.user, task.tenant),
            "takes_messages": task.agent.is_active and task.tenant.is_active,
            "actions": task_action_list(task=task, limit=ACTIONS_SHOWN),
        },
    )


# --- the live event stream -----------------------------------------------------------------


class EventFrame(TypedDict):
    seq: int
    kind: str
    state: str
    created_at: str
    summary: str
    data: Any


def _event_frames_from(task_pk: uuid.UUID, seq: int) -> list[EventFrame]:
    rows = task_event_rows(task_id=task_pk, from_seq=seq)
    return [
        {
            "seq": s,
            "kind": kind,
            "state": state,
            "created_at": created.isoformat(),
            "summary": event_summary(data),
            "data": data,
        }
        for s, kind, state, created, data in rows
    ]


def _sse(frame: EventFrame) -> bytes:
    return sse_frame(frame, event_id=frame["seq"])


def _sse_end(state: str) -> bytes:
    # Tells the page the task is over, so its EventSource closes instead of reconnecting.
    return sse_frame({"state": state}, event="end")


async def _stream(task_pk: uuid.UUID, after: int, state: str, ended: bool) -> AsyncIterator[bytes]:
    if ended:
        yield _sse_end(state)
        return
    # The follower says which events exist and when the task is over; the console's frames
    # also carry the row's kind, state and time, read in batches as the follower advances.
    ahead: dict[int, EventFrame] = {}
    SSE_STREAMS_OPEN.inc()
    try:
        async with EventFollower(task_pk, after, ends_at=TERMINAL_STATES) as follower:
            events = follower.events(idle=settings.A2A_SSE_KEEPALIVE_SECONDS)
            async with contextlib.aclosing(events):
                async for item in events:
                    if item is None:
                        yield KEEP_ALIVE
                        continue
                    if item.seq not in ahead:
                        rows = await database_sync_to_async(_event_frames_from)(task_pk, item.seq)
                        ahead = {frame["seq"]: frame for frame in rows}
                    frame = ahead.pop(item.seq)
                    yield _sse(frame)
                    if item.final:
                        yield _sse_end(frame["state"])
                        return
    finally:
        SSE_STREAMS_OPEN.dec()  # also when the viewer left


def _after(request: HttpRequest, last_seq: int) -> int:
    """The seq to stream after: a reconnecting EventSource's Last-Event-ID wins over `after`."""
    raw = request.headers.get("Last-Event-ID") or request.GET.get("after") or "0"
    seq = int(raw)  # ValueError for anything but an integer
    if not 0 <= seq <= last_seq:
        raise ValueError(raw)
    return seq


@login_required
async def task_events(request: HttpRequest, tenant_slug: str, task_id: str) -> HttpResponse:
    user = await request.auser()
    # One lookup at the start of the request, run as the ORM's own a* methods run theirs; the
    # stream's many reads, spread over its whole life, go through database_sync_to_async (in
    # the follower, and below), which also drops stale connections between them.
    task = await sync_to_async(task_get_or_404)(user=user, tenant_slug=tenant_slug, task_id=task_id)
    try:
        after = _after(request, task.last_seq)
    except ValueError:
        return HttpResponseBadRequest(
            f"'after' (or Last-Event-ID) must be an event seq of this task, 0 to {task.last_seq}.",
            content_type="text/plain",
        )
    ended = task.is_terminal and after >= task.last_seq
    response = StreamingHttpResponse(
        _stream(task.pk, after, task.state, ended), content_type="text/event-stream"
    )
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # proxies must pass each frame on as it comes
    return response
