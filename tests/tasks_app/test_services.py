"""The task services on real PostgreSQL: send, event recording, cancel, claim and reaping."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from django.conf import settings
from django.utils import timezone
from google.protobuf.json_format import MessageToDict, ParseDict

from agents.auth import Principal
from push_app.models import PushConfig
from tasks_app.errors import (
    ContentTypeNotSupportedError,
    InvalidAgentResponseError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from tasks_app.models import Task, TaskEvent
from tasks_app.selectors import task_get
from tasks_app.services import (
    message_send,
    sent_messages_forget,
    task_cancel_request,
    task_claim,
    task_event_record,
    task_handback,
    task_job_requeue,
    task_release,
    tasks_heartbeat,
    tasks_reap,
    tasks_requeue_lost_jobs,
)
from tests.factories import task_send

ALICE = Principal(owner="key:alice")
BOB = Principal(owner="key:bob")


@pytest.fixture
def agent(make_tenant, make_agent):
    return make_agent(make_tenant(), "echo")


def status(task_id, state, text=None):
    event = TaskStatusUpdateEvent(task_id=str(task_id), status=TaskStatus(state=state))
    if text:
        event.status.message.CopyFrom(
            Message(message_id=str(uuid.uuid4()), role=Role.ROLE_AGENT, parts=[Part(text=text)])
        )
    return event


def test_send_creates_submitted_task_with_history_and_first_event(agent):
    outcome = task_send(agent, text="hello")
    task = Task.objects.get(pk=outcome.task_id)
    assert task.state == "TASK_STATE_SUBMITTED" and task.owner == "key:alice"
    assert list(task.messages.values_list("role", flat=True)) == ["ROLE_USER"]
    event = TaskEvent.objects.get(task=task)
    assert (event.seq, event.kind) == (1, "task") and outcome.since_seq == 1
    assert event.data["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"


@pytest.mark.parametrize(
    "mutate, error, words",
    [
        (lambda m: m.ClearField("message_id"), InvalidParamsError, "messageId"),
        (lambda m: m.ClearField("parts"), InvalidParamsError, "parts"),
        (lambda m: setattr(m, "role", Role.ROLE_AGENT), InvalidParamsError, "ROLE_USER"),
        (lambda m: m.parts.add(), InvalidParamsError, "parts[1]"),
        (
            lambda m: m.parts.add(url="https://x/y.png", media_type="image/png"),
            ContentTypeNotSupportedError,
            "image/png",
        ),
    ],
)
def test_send_rejects_malformed_messages(agent, mutate, error, words):
    message = Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="x")])
    mutate(message)
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        message_send(agent=agent, principal=ALICE, request=SendMessageRequest(message=message))
    assert not Task.objects.exists()


def test_send_rejects_output_modes_the_agent_cannot_produce(agent):
    request = SendMessageRequest(
        message=Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="x")])
    )
    request.configuration.accepted_output_modes.append("image/png")
    with pytest.raises(ContentTypeNotSupportedError, match="acceptedOutputModes"):
        message_send(agent=agent, principal=ALICE, request=request)


def job_of(task_id):
    return Task.objects.get(pk=task_id).job_id


def ask_for_input(task_id):
    """Let a worker run the pending turn, which ends by asking for input."""
    assert task_claim(task_id=task_id, job_id=job_of(task_id)) == "claimed"
    task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_INPUT_REQUIRED))
    task_release(task_id=task_id)


def test_continuing_needs_same_owner_an_interrupted_task_and_matching_context(agent):
    task_id = task_send(agent).task_id
    with pytest.raises(UnsupportedOperationError, match="still on it"):
        task_send(agent, task_id=str(task_id))
    ask_for_input(task_id)
    with pytest.raises(TaskNotFoundError):
        task_send(agent, principal=BOB, task_id=str(task_id))
    with pytest.raises(InvalidParamsError, match="contextId"):
        task_send(agent, task_id=str(task_id), context_id="another")
    again = task_send(agent, task_id=str(task_id))
    assert again.task_id == task_id and again.since_seq == 2
    assert Task.objects.get(pk=task_id).messages.count() == 2
    with pytest.raises(UnsupportedOperationError, match="already has a message waiting"):
        task_send(agent, task_id=str(task_id))
    task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_COMPLETED))
    with pytest.raises(UnsupportedOperationError, match="TASK_STATE_COMPLETED"):
        task_send(agent, task_id=str(task_id))


def test_ids_longer_than_the_columns_are_invalid_params(agent):
    with pytest.raises(InvalidParamsError, match="messageId is longer"):
        message_send(
            agent=agent,
            principal=ALICE,
            request=SendMessageRequest(
                message=Message(message_id="m" * 201, role=Role.ROLE_USER, parts=[Part(text="x")])
            ),
        )
    with pytest.raises(InvalidParamsError, match="contextId is longer"):
        task_send(agent, context_id="c" * 201)


def test_status_message_moves_into_history_when_replaced(agent):
    task_id = task_send(agent).task_id
    task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_WORKING, "w"))
    task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_COMPLETED, "d"))
    task = task_get(agent=agent, principal=ALICE, task_id=str(task_id))
    assert [m.parts[0].text for m in task.history] == ["hi", "w"]
    assert task.status.message.parts[0].text == "d"
    assert list(TaskEvent.objects.filter(task_id=task_id).values_list("seq", "kind")) == [
        (1, "task"),
        (2, "status_update"),
        (3, "status_update"),
    ]


def test_artifact_chunks_append_and_replace(agent):
    task_id = task_send(agent).task_id

    def chunk(append, *parts):
        return TaskArtifactUpdateEvent(
            task_id=str(task_id),
            append=append,
            artifact=Artifact(
                artifact_id="a1", name="out", parts=[ParseDict(p, Part()) for p in parts]
            ),
        )

    def stored_parts():
        task = task_get(agent=agent, principal=ALICE, task_id=str(task_id))
        assert len(task.artifacts) == 1
        return [MessageToDict(p) for p in task.artifacts[0].parts]

    # Streamed text reads as one text: each chunk joins the text before it.
    task_event_record(task_id=task_id, event=chunk(False, {"text": "one "}))
    task_event_record(task_id=task_id, event=chunk(True, {"text": "two "}))
    task_event_record(task_id=task_id, event=chunk(True, {"text": "three"}))
    assert stored_parts() == [{"text": "one two three"}]
    # Parts that are not plain text of the same kind stay parts of their own.
    for part in (
        {"data": {"n": 1}},
        {"text": "a", "mediaType": "text/x"},
        {"text": "b", "mediaType": "text/x"},
        {"text": "c", "metadata": {"k": "v"}},
    ):
        task_event_record(task_id=task_id, event=chunk(True, part))
    assert stored_parts() == [
        {"text": "one two three"},
        {"data": {"n": 1.0}},
        {"text": "ab", "mediaType": "text/x"},
        {"text": "c", "metadata": {"k": "v"}},
    ]
    # A chunk that does not append replaces the artifact, its parts as sent.
    fresh = chunk(False, {"text": "fresh "}, {"text": "start"})
    task_event_record(task_id=task_id, event=fresh)
    assert stored_parts() == [{"text": "fresh "}, {"text": "start"}]
    # The event log keeps every chunk as it was sent.
    chunks = [
        e.data["artifactUpdate"]["artifact"]["parts"]
        for e in TaskEvent.objects.filter(task_id=task_id, kind=TaskEvent.Kind.ARTIFACT).order_by(
            "seq"
        )
    ]
    assert chunks[:3] == [[{"text": "one "}], [{"text": "two "}], [{"text": "three"}]]


def test_events_after_the_end_are_ignored_and_foreign_events_are_refused(agent):
    task_id = task_send(agent).task_id
    with pytest.raises(InvalidAgentResponseError, match="another|while running"):
        task_event_record(task_id=task_id, event=status(uuid.uuid4(), TaskState.TASK_STATE_WORKING))
    assert task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_FAILED))
    assert not task_event_record(
        task_id=task_id, event=status(task_id, TaskState.TASK_STATE_COMPLETED)
    )
    assert Task.objects.get(pk=task_id).state == "TASK_STATE_FAILED"


def test_direct_message_reply_completes_and_is_kept_in_history(agent):
    task_id = task_send(agent).task_id
    reply = Message(message_id="r1", role=Role.ROLE_AGENT, parts=[Part(text="direct")])
    task_event_record(task_id=task_id, event=reply)
    task = Task.objects.get(pk=task_id)
    assert task.state == "TASK_STATE_COMPLETED" and task.reply_message_id == "r1"
    assert task.messages.count() == 2


def test_cancel_of_unstarted_task_ends_it_at_once_and_terminal_is_not_cancelable(agent):
    task_id = task_send(agent).task_id
    pk, needs_worker, seq = task_cancel_request(agent=agent, principal=ALICE, task_id=str(task_id))
    assert (pk, needs_worker, seq) == (task_id, False, 2)
    assert Task.objects.get(pk=task_id).state == "TASK_STATE_CANCELED"
    with pytest.raises(TaskNotCancelableError, match="already TASK_STATE_CANCELED"):
        task_cancel_request(agent=agent, principal=ALICE, task_id=str(task_id))
    with pytest.raises(TaskNotFoundError):
        task_cancel_request(agent=agent, principal=BOB, task_id=str(task_id))


def test_a_job_is_claimed_once_and_a_redelivered_copy_finds_nothing(agent):
    task_id = task_send(agent).task_id
    job = job_of(task_id)
    assert task_claim(task_id=task_id, job_id="someone-else") == "ended"
    assert task_claim(task_id=task_id, job_id=job, runner="w1") == "claimed"
    row = Task.objects.get(pk=task_id)
    assert (row.runner, row.job_id, row.job_queued_at) == ("w1", "", None)
    assert row.job_args == {"position": 0, "configuration": {}, "extensions": []}  # for a retry
    assert row.running_since <= timezone.now() and row.lease_expires_at == row.running_since + (
        timedelta(seconds=settings.A2A_TASK_LEASE_SECONDS)
    )
    assert task_claim(task_id=task_id, job_id=job) == "ended"
    task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_INPUT_REQUIRED))
    follow_up = task_send(agent, task_id=str(task_id))  # before the first run has released the task
    assert task_claim(task_id=task_id, job_id=job_of(task_id)) == "busy"
    task_release(task_id=task_id)
    assert task_claim(task_id=task_id, job_id=job_of(follow_up.task_id)) == "claimed"


def test_cancel_of_running_task_only_flags_it_and_release_honours_it(agent):
    task_id = task_send(agent).task_id
    assert task_claim(task_id=task_id, job_id=job_of(task_id)) == "claimed"
    _, needs_worker, _ = task_cancel_request(agent=agent, principal=ALICE, task_id=str(task_id))
    task = Task.objects.get(pk=task_id)
    assert needs_worker and task.cancel_requested and task.state == "TASK_STATE_SUBMITTED"
    task_release(task_id=task_id)  # the run ended without the executor confirming
    task = task_get(agent=agent, principal=ALICE, task_id=str(task_id))
    assert task.status.state == TaskState.TASK_STATE_CANCELED


def test_reaper_fails_tasks_whose_lease_expired_and_spares_live_ones(agent):
    stale, live, asking = (
        task_send(agent).task_id,
        task_send(agent).task_id,
        task_send(agent).task_id,
    )
    for task_id in (stale, live, asking):
        assert task_claim(task_id=task_id, job_id=job_of(task_id)) == "claimed"
    task_event_record(task_id=asking, event=status(asking, TaskState.TASK_STATE_INPUT_REQUIRED))
    Task.objects.filter(pk__in=[stale, asking]).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert tasks_reap() == [stale]
    asking_row = Task.objects.get(pk=asking)
    assert asking_row.state == "TASK_STATE_INPUT_REQUIRED" and asking_row.running_since is None
    reaped = task_get(agent=agent, principal=ALICE, task_id=str(stale))
    assert reaped.status.state == TaskState.TASK_STATE_FAILED
    assert "stopped responding" in reaped.status.message.parts[0].text
    assert Task.objects.get(pk=stale).running_since is None
    assert Task.objects.get(pk=live).state == "TASK_STATE_SUBMITTED"
    assert task_claim(task_id=stale, job_id="") == "ended"


def test_a_follow_up_puts_the_agents_question_before_the_answer_in_history(agent):
    task_id = task_send(agent, text="first").task_id
    task_claim(task_id=task_id, job_id=job_of(task_id))
    task_event_record(
        task_id=task_id, event=status(task_id, TaskState.TASK_STATE_INPUT_REQUIRED, "which?")
    )
    task_send(agent, text="this one", task_id=str(task_id))
    task = task_get(agent=agent, principal=ALICE, task_id=str(task_id))
    assert [m.parts[0].text for m in task.history] == ["first", "which?", "this one"]
    assert not task.status.HasField("message")


def test_an_inline_push_config_stays_out_of_the_jobs_row(agent):
    """Its token and credentials are stored encrypted with the push configs; the queued job's
    arguments (a plain JSON column, then the broker) carry the rest of the configuration."""
    request = SendMessageRequest(
        message=Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="x")])
    )
    push = request.configuration.task_push_notification_config
    push.url = "https://93.184.216.34/hook"
    push.token = "secret-token"
    push.authentication.scheme = "Bearer"
    push.authentication.credentials = "secret-credentials"
    request.configuration.accepted_output_modes.append("text/plain")
    outcome = message_send(agent=agent, principal=ALICE, request=request)
    job_args = Task.objects.get(pk=outcome.task_id).job_args
    assert job_args["configuration"] == {"acceptedOutputModes": ["text/plain"]}
    assert "secret" not in str(job_args)
    assert PushConfig.objects.get(task_id=outcome.task_id).token_encrypted  # stored, encrypted


def test_one_heartbeat_renews_every_lease_of_its_worker_and_reports_cancels(agent):
    mine = [task_send(agent).task_id for _ in range(3)]
    theirs = task_send(agent).task_id
    for task_id in mine:
        assert task_claim(task_id=task_id, job_id=job_of(task_id), runner="w1") == "claimed"
    assert task_claim(task_id=theirs, job_id=job_of(theirs), runner="w2") == "claimed"
    lapsed = timezone.now() - timedelta(seconds=1)
    Task.objects.update(lease_expires_at=lapsed)
    task_cancel_request(agent=agent, principal=ALICE, task_id=str(mine[1]))
    task_cancel_request(agent=agent, principal=ALICE, task_id=str(theirs))

    assert tasks_heartbeat(runner="w1", task_ids=[*mine, theirs]) == [mine[1]]
    assert all(Task.objects.get(pk=t).lease_expires_at > timezone.now() for t in mine)
    assert Task.objects.get(pk=theirs).lease_expires_at == lapsed  # another worker's run
    assert tasks_reap() == [theirs]


def test_a_heartbeat_renews_only_the_runs_its_worker_has_in_flight(agent):
    """A row still naming the worker after its run let go of it (the release was lost with the
    database) is not renewed: its lease lapses and the reaper deals with it."""
    running, let_go = task_send(agent).task_id, task_send(agent).task_id
    for task_id in (running, let_go):
        assert task_claim(task_id=task_id, job_id=job_of(task_id), runner="w1") == "claimed"
    Task.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert tasks_heartbeat(runner="w1", task_ids=[running]) == []
    assert Task.objects.get(pk=running).lease_expires_at > timezone.now()
    assert tasks_reap() == [let_go]
    assert Task.objects.get(pk=let_go).state == "TASK_STATE_FAILED"


def test_a_claim_made_again_after_its_answer_was_lost_is_the_workers_own(agent):
    task_id = task_send(agent).task_id
    job = job_of(task_id)
    assert task_claim(task_id=task_id, job_id=job, runner="w1") == "claimed"
    # The first try committed, but the database's answer never came: the worker tries again.
    assert task_claim(task_id=task_id, job_id=job, runner="w1") == "claimed"
    assert task_claim(task_id=task_id, job_id=job, runner="w2") == "ended"  # a redelivery


@pytest.fixture
def published():
    """The agent runs published to the broker (a real one), as (job id, task id, position)."""
    from celery.signals import before_task_publish

    seen = []

    def record(headers, body, routing_key, **_):
        if headers.get("task") == "tasks_app.tasks.run_agent_task":
            seen.append((headers["id"], uuid.UUID(body[0][0]), body[0][1], routing_key))

    before_task_publish.connect(record, weak=False)
    yield seen
    before_task_publish.disconnect(record)


def test_a_handed_back_run_waits_for_its_job_again(
    agent, published, django_capture_on_commit_callbacks
):
    task_id = task_send(agent).task_id
    job = job_of(task_id)
    args = Task.objects.get(pk=task_id).job_args
    assert task_claim(task_id=task_id, job_id=job, runner="w1") == "claimed"
    task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_WORKING))

    with django_capture_on_commit_callbacks(execute=True):
        assert task_handback(task_id=task_id, job_id=job, job_args=args, runner="w1")
    task = Task.objects.get(pk=task_id)
    assert (task.state, task.running_since, task.runner) == ("TASK_STATE_WORKING", None, "")
    assert (task.job_id, task.job_args) == (job, args) and task.job_queued_at is not None
    assert task.attempt == 2  # the next run is told it does the turn again
    assert published == [(job, task_id, args["position"], "agents")]
    assert task_claim(task_id=task_id, job_id=job, runner="w2") == "claimed"


def test_a_run_no_longer_its_workers_is_not_handed_back(agent, published):
    """The run's lease lapsed while its worker waited for the database, and the reaper took
    it over: the worker's late hand-back changes nothing."""
    task_id = task_send(agent).task_id
    job, args = job_of(task_id), Task.objects.get(pk=task_id).job_args
    assert task_claim(task_id=task_id, job_id=job, runner="w1") == "claimed"
    assert not task_handback(task_id=task_id, job_id=job, job_args=args, runner="w2")
    lapse(task_id)
    assert tasks_reap() == [task_id]
    published.clear()
    assert not task_handback(task_id=task_id, job_id=job, job_args=args, runner="w1")
    assert Task.objects.get(pk=task_id).state == "TASK_STATE_FAILED" and not published


def test_a_run_that_lost_the_database_is_handed_back_by_its_agents_worker_loss_policy(
    make_tenant, make_agent, published, django_capture_on_commit_callbacks
):
    lost = "OperationalError: terminating connection due to administrator command"
    agent = make_agent(make_tenant(), "echo", worker_loss="retry", worker_loss_attempts=2)
    task_id = task_send(agent).task_id
    job, args = job_of(task_id), Task.objects.get(pk=task_id).job_args
    assert task_claim(task_id=task_id, job_id=job, runner="w1") == "claimed"
    task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_WORKING))
    with django_capture_on_commit_callbacks(execute=True):
        assert task_handback(task_id=task_id, job_id=job, job_args=args, runner="w1", lost=lost)
    task = Task.objects.get(pk=task_id)
    assert (task.state, task.attempt, task.runner) == ("TASK_STATE_WORKING", 2, "")
    text = task.status_message["parts"][0]["text"]
    assert lost in text and "starts again (attempt 2 of 2)" in text
    assert published[-1][:2] == (job, task_id)
    # Attempt 2 loses it too: none left, the task fails and says why.
    assert task_claim(task_id=task_id, job_id=job, runner="w2") == "claimed"
    assert not task_handback(task_id=task_id, job_id=job, job_args=args, runner="w2", lost=lost)
    task = Task.objects.get(pk=task_id)
    assert (task.state, task.running_since, task.job_id) == ("TASK_STATE_FAILED", None, "")
    assert "failed the task" in task.status_message["parts"][0]["text"]

    fails = make_agent(agent.tenant, "fails")  # worker_loss "fail", the default
    task_id = task_send(fails).task_id
    job, args = job_of(task_id), Task.objects.get(pk=task_id).job_args
    assert task_claim(task_id=task_id, job_id=job, runner="w1") == "claimed"
    assert not task_handback(task_id=task_id, job_id=job, job_args=args, runner="w1", lost=lost)
    assert Task.objects.get(pk=task_id).state == "TASK_STATE_FAILED"


def test_a_release_made_again_leaves_the_next_turns_run_alone(agent):
    """A run's release committed but its answer was lost with the database; by the time the
    worker makes it again, the task's next turn runs on another worker."""
    task_id = task_send(agent).task_id
    assert task_claim(task_id=task_id, job_id=job_of(task_id), runner="w1") == "claimed"
    task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_INPUT_REQUIRED))
    task_release(task_id=task_id, executor_returned=True, runner="w1")
    task_send(agent, text="the input", task_id=task_id)
    assert task_claim(task_id=task_id, job_id=job_of(task_id), runner="w2") == "claimed"
    task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_WORKING))
    task_release(task_id=task_id, executor_returned=True, runner="w1")  # the repeat
    task = Task.objects.get(pk=task_id)
    assert (task.state, task.runner) == ("TASK_STATE_WORKING", "w2")
    assert task.running_since is not None and task.lease_expires_at is not None


def test_a_hand_back_made_again_after_its_commit_queues_its_job(
    agent, published, django_capture_on_commit_callbacks
):
    """The hand-back committed, but its answer (and so the queueing after the commit) was lost:
    made again, it queues the job, and the task is handed back once, one attempt further."""
    task_id = task_send(agent).task_id
    job, args = job_of(task_id), Task.objects.get(pk=task_id).job_args
    assert task_claim(task_id=task_id, job_id=job, runner="w1") == "claimed"
    with django_capture_on_commit_callbacks(execute=False):  # the commit's callbacks dropped
        assert task_handback(task_id=task_id, job_id=job, job_args=args, runner="w1")
    assert published == []
    with django_capture_on_commit_callbacks(execute=True):
        assert task_handback(task_id=task_id, job_id=job, job_args=args, runner="w1")
    assert published == [(job, task_id, args["position"], "agents")]
    assert Task.objects.get(pk=task_id).attempt == 2
    # Once claimed by the next worker, a late repeat changes nothing and queues nothing.
    assert task_claim(task_id=task_id, job_id=job, runner="w2") == "claimed"
    with django_capture_on_commit_callbacks(execute=True):
        assert not task_handback(task_id=task_id, job_id=job, job_args=args, runner="w1")
    assert len(published) == 1 and Task.objects.get(pk=task_id).runner == "w2"


@pytest.mark.parametrize("lost", ["", "OperationalError: the connection is closed"])
def test_a_run_that_asked_for_input_is_only_released_when_handed_back(
    make_tenant, make_agent, published, django_capture_on_commit_callbacks, lost
):
    """Its turn was over: neither failed (a lost database, `fail`) nor done again."""
    agent = make_agent(make_tenant(), "echo")  # worker_loss "fail"
    task_id = task_send(agent).task_id
    job, args = job_of(task_id), Task.objects.get(pk=task_id).job_args
    assert task_claim(task_id=task_id, job_id=job, runner="w1") == "claimed"
    task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_INPUT_REQUIRED))
    with django_capture_on_commit_callbacks(execute=True):
        assert not task_handback(task_id=task_id, job_id=job, job_args=args, runner="w1", lost=lost)
    task = Task.objects.get(pk=task_id)
    assert (task.state, task.runner, task.running_since, task.attempt) == (
        "TASK_STATE_INPUT_REQUIRED",
        "",
        None,
        1,
    )
    assert published == []


def test_a_run_canceled_as_it_is_handed_back_ends_canceled(agent):
    task_id = task_send(agent).task_id
    job, args = job_of(task_id), Task.objects.get(pk=task_id).job_args
    assert task_claim(task_id=task_id, job_id=job, runner="w1") == "claimed"
    task_cancel_request(agent=agent, principal=ALICE, task_id=str(task_id))
    assert not task_handback(task_id=task_id, job_id=job, job_args=args, runner="w1")
    task = Task.objects.get(pk=task_id)
    assert task.state == "TASK_STATE_CANCELED" and task.job_id == ""


def test_an_unclaimed_job_of_a_stopping_worker_is_queued_again_only_if_awaited(agent, published):
    task_id = task_send(agent).task_id
    job, args = job_of(task_id), Task.objects.get(pk=task_id).job_args
    assert task_job_requeue(task_id=task_id, job_id=job, job_args=args)
    assert task_claim(task_id=task_id, job_id=job) == "claimed"
    assert not task_job_requeue(task_id=task_id, job_id=job, job_args=args)
    assert published == [(job, task_id, args["position"], "agents")]


def test_a_run_whose_executor_left_the_task_unsettled_is_failed_on_release(agent):
    working, asking, canceled = (
        task_send(agent).task_id,
        task_send(agent).task_id,
        task_send(agent).task_id,
    )
    for task_id in (working, asking, canceled):
        assert task_claim(task_id=task_id, job_id=job_of(task_id), runner="w1") == "claimed"
        task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_WORKING))
    task_event_record(task_id=asking, event=status(asking, TaskState.TASK_STATE_INPUT_REQUIRED))
    task_cancel_request(agent=agent, principal=ALICE, task_id=str(canceled))

    for task_id in (working, asking, canceled):
        task_release(task_id=task_id, executor_returned=True)

    failed = task_get(agent=agent, principal=ALICE, task_id=str(working))
    assert failed.status.state == TaskState.TASK_STATE_FAILED
    assert "returned while the task was still TASK_STATE_WORKING" in (
        failed.status.message.parts[0].text
    )
    assert Task.objects.get(pk=asking).state == "TASK_STATE_INPUT_REQUIRED"
    assert Task.objects.get(pk=canceled).state == "TASK_STATE_CANCELED"
    assert not Task.objects.filter(running_since__isnull=False).exists()


def test_a_send_that_makes_a_task_hands_back_the_task_as_committed(agent):
    outcome = task_send(agent, text="hello")
    assert outcome.task == task_get(agent=agent, principal=ALICE, task_id=str(outcome.task_id))
    assert outcome.task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert [m.parts[0].text for m in outcome.task.history] == ["hello"]
    ask_for_input(outcome.task_id)
    follow_up = task_send(agent, text="more", task_id=str(outcome.task_id))
    assert follow_up.task is None  # a follow-up's answer is read once the turn settles


def test_a_repeated_message_id_gets_the_first_sends_outcome_and_writes_nothing(agent):
    first = task_send(agent, message_id="again")
    repeat = task_send(agent, message_id="again")
    assert (repeat.task_id, repeat.since_seq, repeat.created) == (first.task_id, 1, True)
    assert repeat.repeated and repeat.task is None
    assert Task.objects.count() == 1 and TaskEvent.objects.count() == 1
    # Another caller, or another agent, sending the same id is sending another message.
    assert task_send(agent, message_id="again", principal=BOB).task_id != first.task_id


def test_a_repeated_follow_up_gets_its_turn_not_an_error(agent):
    task_id = task_send(agent).task_id
    ask_for_input(task_id)
    turn = task_send(agent, task_id=str(task_id), message_id="answer")
    assert turn.since_seq == 2 and not turn.repeated
    # The turn is under way ("already has a message waiting" for any other message).
    repeat = task_send(agent, task_id=str(task_id), message_id="answer")
    assert (repeat.task_id, repeat.since_seq, repeat.created) == (task_id, 2, False)
    assert repeat.repeated
    assert Task.objects.get(pk=task_id).messages.count() == 2


def test_message_ids_are_forgotten_after_their_retention(agent, settings):
    first = task_send(agent, message_id="old")
    assert sent_messages_forget(now=timezone.now()) == 0
    later = timezone.now() + timedelta(seconds=settings.A2A_MESSAGE_ID_RETENTION_SECONDS + 1)
    assert sent_messages_forget(now=later) == 1
    assert task_send(agent, message_id="old").task_id != first.task_id


def test_with_no_retention_every_send_is_new(agent, settings):
    settings.A2A_MESSAGE_ID_RETENTION_SECONDS = 0
    first = task_send(agent, message_id="same")
    assert task_send(agent, message_id="same").task_id != first.task_id


def lapse(task_id):
    Task.objects.filter(pk=task_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_a_retry_agents_run_whose_worker_died_is_queued_again_until_its_attempts_run_out(
    make_tenant, make_agent, published, django_capture_on_commit_callbacks
):
    agent = make_agent(make_tenant(), "echo", worker_loss="retry", worker_loss_attempts=2)
    task_id = task_send(agent).task_id
    assert task_claim(task_id=task_id, job_id=job_of(task_id), runner="w1") == "claimed"
    task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_WORKING))
    lapse(task_id)
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks_reap() == [task_id]
    task = Task.objects.get(pk=task_id)
    assert (task.state, task.attempt, task.running_since, task.runner) == (
        "TASK_STATE_WORKING",
        2,
        None,
        "",
    )
    assert "attempt 2 of 2" in task.status_message["parts"][0]["text"]
    assert published[-1][:3] == (task.job_id, task_id, 0)
    # The second run's worker dies too: no attempts left, the task fails.
    assert task_claim(task_id=task_id, job_id=task.job_id, runner="w2") == "claimed"
    lapse(task_id)
    assert tasks_reap() == [task_id]
    task = Task.objects.get(pk=task_id)
    assert task.state == "TASK_STATE_FAILED" and task.running_since is None
    assert "failed the task" in task.status_message["parts"][0]["text"]


def test_a_fail_agents_run_whose_worker_died_is_failed(agent):
    task_id = task_send(agent).task_id
    assert task_claim(task_id=task_id, job_id=job_of(task_id), runner="w1") == "claimed"
    lapse(task_id)
    assert tasks_reap() == [task_id]
    assert Task.objects.get(pk=task_id).state == "TASK_STATE_FAILED"


def test_runs_queued_before_the_broker_started_are_queued_again_once(agent, published):
    waiting = task_send(agent).task_id
    started = timezone.now()
    after = task_send(agent).task_id  # queued after the broker's start: the broker has it
    published.clear()
    assert tasks_requeue_lost_jobs(broker_started_at=started) == [waiting]
    assert [p[1] for p in published] == [waiting]
    # Requeued, it counts as queued now: the next round leaves it be.
    assert tasks_requeue_lost_jobs(broker_started_at=started) == []
    assert tasks_requeue_lost_jobs() == []  # nothing waited A2A_REQUEUE_AFTER_SECONDS
    assert after not in [p[1] for p in published]


def test_tasks_that_ended_before_the_retention_are_deleted_with_what_they_hold(agent, settings):
    from tasks_app.models import Message, SentMessage
    from tasks_app.services import task_counts_reconcile, tasks_delete_expired

    assert tasks_delete_expired() == 0  # retention off: nothing is ever deleted
    settings.A2A_TASK_RETENTION_DAYS = 7
    old, recent, unfinished = (task_send(agent).task_id for _ in range(3))
    for task_id in (old, recent):
        task_event_record(task_id=task_id, event=status(task_id, TaskState.TASK_STATE_COMPLETED))
    long_ago = timezone.now() - timedelta(days=8)
    Task.objects.filter(pk__in=[old, unfinished]).update(status_timestamp=long_ago)

    assert tasks_delete_expired(batch=1) == 1
    assert tasks_delete_expired() == 0
    assert set(Task.objects.values_list("pk", flat=True)) == {recent, unfinished}
    for model in (TaskEvent, Message, SentMessage):
        assert not model.objects.filter(task_id=old).exists()
    assert task_counts_reconcile() == 0  # the counts went with the task
