"""How a stream's events read in each dialect, where v0.3 needs more than a mapping of each
event: a v0.3 stream that follows a task ends with a status update marked `final`."""

from __future__ import annotations

import uuid

from a2a.compat.v0_3 import proto_utils
from a2a.types import (
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from bindings.codecs import v03
from bindings.codecs.v01 import v01_stream_events
from tasks_app.streams import StreamItem

TASK_ID, CONTEXT_ID = str(uuid.uuid4()), "ctx"


def task(state: TaskState) -> StreamResponse:
    return StreamResponse(
        task=Task(id=TASK_ID, context_id=CONTEXT_ID, status=TaskStatus(state=state))
    )


def reply() -> StreamResponse:
    return StreamResponse(
        message=Message(
            message_id="r", role=Role.ROLE_AGENT, task_id=TASK_ID, parts=[Part(text="hi")]
        )
    )


def status(state: TaskState) -> StreamResponse:
    update = TaskStatusUpdateEvent(
        task_id=TASK_ID, context_id=CONTEXT_ID, status=TaskStatus(state=state)
    )
    return StreamResponse(status_update=update)


def item(response: StreamResponse, final: bool, seq: int = 1) -> StreamItem:
    return StreamItem(uuid.UUID(TASK_ID), seq, response, final)


def test_v03_a_stream_that_ends_on_a_task_gets_a_final_status_update():
    render = v03.stream_renderer("json")
    events = render(item(task(TaskState.TASK_STATE_COMPLETED), final=True))
    assert [e["kind"] for e in events] == ["task", "status-update"]
    assert events[1]["final"] is True and events[1]["status"]["state"] == "completed"
    assert events[1]["taskId"] == TASK_ID and events[1]["contextId"] == CONTEXT_ID


def test_v03_an_opening_task_then_updates_render_one_to_one():
    render = v03.stream_renderer("json")
    (opening,) = render(item(task(TaskState.TASK_STATE_SUBMITTED), final=False))
    assert opening["kind"] == "task" and opening["status"]["state"] == "submitted"
    (working,) = render(item(status(TaskState.TASK_STATE_WORKING), final=False, seq=2))
    assert working["final"] is False
    (done,) = render(item(status(TaskState.TASK_STATE_COMPLETED), final=True, seq=3))
    assert done["final"] is True


def test_v03_a_message_after_the_task_completes_it_in_a_final_status_update():
    render = v03.stream_renderer("json")
    render(item(task(TaskState.TASK_STATE_SUBMITTED), final=False))
    (last,) = render(item(reply(), final=True, seq=2))
    assert last["kind"] == "status-update" and last["final"] is True
    assert last["status"]["state"] == "completed"
    assert last["status"]["message"]["parts"][0]["text"] == "hi"
    assert last["taskId"] == TASK_ID


def test_v03_a_stream_that_is_one_message_stays_one_message():
    (only,) = v03.stream_renderer("json")(item(reply(), final=True))
    assert only["kind"] == "message" and only["parts"][0]["text"] == "hi"


def test_v03_renderers_keep_no_state_between_streams():
    first, second = v03.stream_renderer("json"), v03.stream_renderer("json")
    first(item(task(TaskState.TASK_STATE_SUBMITTED), final=False))
    assert second(item(reply(), final=True))[0]["kind"] == "message"


def test_v03_grpc_and_rest_forms_carry_final_too():
    events = v03.V03StreamEvents()
    pb = [
        proto_utils.ToProto.stream_response(e)
        for e in events(task(TaskState.TASK_STATE_FAILED), final=True)
    ]
    assert [p.WhichOneof("payload") for p in pb] == ["task", "status_update"]
    assert pb[1].status_update.final


def test_v01_a_message_after_the_task_is_the_final_completed_status():
    indexes: dict[str, int] = {}
    opening = v01_stream_events(
        task(TaskState.TASK_STATE_SUBMITTED), final=False, task_id=TASK_ID, artifact_indexes=indexes
    )
    assert opening[-1]["status"]["state"] == "created" and opening[-1]["final"] is False
    (last,) = v01_stream_events(reply(), final=True, task_id=TASK_ID, artifact_indexes=indexes)
    assert last["final"] is True and last["status"]["state"] == "completed"
