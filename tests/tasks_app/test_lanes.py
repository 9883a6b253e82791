"""Run lanes on real PostgreSQL (tasks_app.lanes): what a send hands to the broker, what waits
in its tenant's lane, what a run's end hands over, and the limits counted there."""

from __future__ import annotations

import time

import pytest
from a2a.types import TaskState

from agents.errors import LimitExceeded
from agents.models import Plan
from tasks_app import lanes
from tasks_app.models import IN_FLIGHT, LaneSender, Task, TaskEvent
from tasks_app.services import (
    task_cancel_request,
    task_claim,
    task_event_record,
    task_release,
    tasks_requeue_lost_jobs,
)
from tests.factories import ALICE, task_send
from tests.tasks_app.test_services import status


@pytest.fixture(autouse=True)
def contended(settings):
    """The window applies whoever sent before (A2A_LANE_CONTENTION_SECONDS=0); the tests of
    contention itself set it again (each test starts with a new record of recent senders,
    tests/conftest.py)."""
    settings.A2A_LANE_CONTENTION_SECONDS = 0


@pytest.fixture
def published():
    """The agent runs published to the broker, as task ids in order."""
    from celery.signals import before_task_publish

    seen = []

    def record(headers, body, **_):
        if headers.get("task") == "tasks_app.tasks.run_agent_task":
            seen.append(body[0][0])

    before_task_publish.connect(record, weak=False)
    yield seen
    before_task_publish.disconnect(record)


@pytest.fixture
def sends(django_capture_on_commit_callbacks):
    """Send `n` messages to `agent`, each committed (its run published unless it waits)."""

    def send(agent, n=1, **fields):
        ids = []
        for _ in range(n):
            with django_capture_on_commit_callbacks(execute=True):
                ids.append(str(task_send(agent, **fields).task_id))
        return ids

    return send


def in_flight(tenant):
    return Task.objects.filter(IN_FLIGHT, tenant=tenant).count()


def run_to_end(task_id, capture, *, runner="w1"):
    """A worker runs the task to completion and releases it, as tasks_app.runtime does
    (its hand-over included)."""
    task = Task.objects.select_related("agent").get(pk=task_id)
    assert task_claim(task_id=task.pk, job_id=task.job_id, runner=runner) == "claimed"
    with capture(execute=True):
        task_event_record(task_id=task.pk, event=status(task.pk, TaskState.TASK_STATE_COMPLETED))
        task_release(task_id=task.pk, executor_returned=True, runner=runner)
        lanes.promote(tenant_id=task.tenant_id, agent=task.agent)


def test_a_tenant_past_its_window_waits_in_its_lane_while_another_tenant_goes_at_once(
    settings, make_tenant, make_agent, published, sends
):
    settings.A2A_LANE_WINDOW = 2
    noisy, quiet = make_agent(make_tenant()), make_agent(make_tenant())
    burst = sends(noisy, 5)
    assert published == burst[:2]
    held = Task.objects.filter(pk__in=burst[2:])
    assert [t.held for t in held] == [True] * 3 and all(t.job_id for t in held)
    assert {t.state for t in held} == {"TASK_STATE_SUBMITTED"}
    assert in_flight(noisy.tenant) == 2

    mine = sends(quiet)
    assert published[-1] == mine[0]  # not behind the three waiting


def test_a_run_ending_hands_over_the_lanes_oldest_waiting_run(
    settings, make_tenant, make_agent, published, sends, django_capture_on_commit_callbacks
):
    settings.A2A_LANE_WINDOW = 2
    agent = make_agent(make_tenant())
    burst = sends(agent, 4)
    published.clear()
    run_to_end(burst[0], django_capture_on_commit_callbacks)
    assert published == [burst[2]]
    assert not Task.objects.get(pk=burst[2]).held
    assert in_flight(agent.tenant) == 2
    # A held run's job cannot be claimed before its lane hands it over.
    waiting = Task.objects.get(pk=burst[3])
    assert task_claim(task_id=waiting.pk, job_id=waiting.job_id, runner="w9") == "ended"
    assert Task.objects.get(pk=burst[3]).held


def test_running_runs_caps_the_tenant_and_agent_running_runs_one_agent(
    settings, make_tenant, make_agent, published, sends
):
    settings.A2A_LANE_WINDOW = 100
    tenant = make_tenant()
    tenant.plan = Plan.objects.create(name="small", running_runs=3)
    tenant.save()
    slow = make_agent(tenant, "slow", limits={"agent_running_runs": 1})
    other = make_agent(tenant, "other")
    sent = sends(slow, 2) + sends(other, 3)
    # slow: one in flight (its own cap); other: two, for the tenant's three.
    assert published == [sent[0], sent[2], sent[3]]
    assert Task.objects.filter(pk__in=[sent[1], sent[4]], held=True).count() == 2


def test_queued_runs_and_stored_tasks_refuse_a_send_that_writes_nothing(
    settings, make_tenant, make_agent, sends
):
    settings.A2A_LANE_WINDOW = 1
    tenant = make_tenant()
    tenant.limits = {"queued_runs": 2}
    tenant.save()
    agent = make_agent(tenant)
    sends(agent, 2)
    before = (Task.objects.filter(tenant=tenant).count(), TaskEvent.objects.count())
    with pytest.raises(LimitExceeded) as refused:
        sends(agent)
    assert (refused.value.reason, refused.value.limit, refused.value.value) == (
        "CONCURRENCY_LIMITED",
        "queued_runs",
        2,
    )
    assert (Task.objects.filter(tenant=tenant).count(), TaskEvent.objects.count()) == before

    tenant.limits = {"stored_tasks": 2}
    tenant.save()
    agent = make_agent(tenant, "fresh")  # read again: its tenant's limits come with it
    with pytest.raises(LimitExceeded) as refused:
        sends(agent)
    assert (refused.value.reason, refused.value.limit) == ("QUOTA_EXCEEDED", "stored_tasks")
    assert Task.objects.filter(tenant=tenant).count() == 2


def test_the_reapers_round_hands_over_what_a_lane_has_room_for(
    settings, make_tenant, make_agent, published, sends, django_capture_on_commit_callbacks
):
    settings.A2A_LANE_WINDOW = 1
    agent = make_agent(make_tenant())
    sent = sends(agent, 3)
    settings.A2A_LANE_WINDOW = 2  # room for one more: no run ended to hand it over
    published.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert lanes.lanes_refill() == 1
    assert published == [sent[1]]
    # The lost-job requeue leaves runs in a lane to the lane.
    Task.objects.filter(pk=sent[2]).update(job_queued_at="2000-01-01T00:00:00Z")
    assert sent[2] not in map(str, tasks_requeue_lost_jobs())


def test_canceling_a_waiting_run_ends_it_and_a_canceled_queued_run_makes_room(
    settings, make_tenant, make_agent, published, sends, django_capture_on_commit_callbacks
):
    settings.A2A_LANE_WINDOW = 1
    agent = make_agent(make_tenant())
    sent = sends(agent, 3)
    with django_capture_on_commit_callbacks(execute=True):
        task_cancel_request(agent=agent, principal=ALICE, task_id=sent[2])
    task = Task.objects.get(pk=sent[2])
    assert (task.state, task.held, task.job_id) == ("TASK_STATE_CANCELED", False, "")
    published.clear()
    with django_capture_on_commit_callbacks(execute=True):
        task_cancel_request(agent=agent, principal=ALICE, task_id=sent[0])
    assert published == [sent[1]]  # the canceled one's place went to the next in the lane
    assert in_flight(agent.tenant) == 1


def test_a_tenant_without_limits_and_no_window_has_no_lane(
    settings, make_tenant, make_agent, published, sends
):
    settings.A2A_LANE_WINDOW = 0
    agent = make_agent(make_tenant())
    assert not lanes.Lane.of(agent).on
    assert published == [] and sends(agent, 3) == published


def test_a_run_that_waits_long_says_why_once_and_the_note_never_enters_the_history(
    settings, make_tenant, make_agent, sends, django_capture_on_commit_callbacks
):
    settings.A2A_LANE_WINDOW = 1
    settings.A2A_LANE_NOTE_SECONDS = 0.001
    tenant = make_tenant()
    tenant.limits = {"running_runs": 1}
    tenant.save()
    agent = make_agent(tenant)
    first, waiting = sends(agent, 2)
    lanes.lanes_refill()
    lanes.lanes_refill()  # once only
    task = Task.objects.get(pk=waiting)
    assert (task.state, task.last_seq) == ("TASK_STATE_SUBMITTED", 2)
    text = task.status_message["parts"][0]["text"]
    assert "limit of 1 runs at once (running_runs)" in text, text
    assert "1 runs under way" in text, text

    run_to_end(first, django_capture_on_commit_callbacks)
    task = Task.objects.get(pk=waiting)
    assert task_claim(task_id=task.pk, job_id=task.job_id, runner="w2") == "claimed"
    task_event_record(task_id=task.pk, event=status(task.pk, TaskState.TASK_STATE_WORKING))
    history = [m.data for m in Task.objects.get(pk=waiting).messages.all()]
    assert [m["role"] for m in history] == ["ROLE_USER"], history


def test_runs_per_day_counts_the_runs_made_and_those_waiting_and_refuses_past_it(
    settings, make_tenant, make_agent, sends
):
    from agents import usage
    from agents.models import UsageDay

    tenant = make_tenant()
    tenant.limits = {"runs_per_day": 3}
    tenant.save()
    agent = make_agent(tenant)
    UsageDay.objects.create(tenant=tenant, agent=agent, day=usage.today(), runs=2)
    sends(agent)  # two run today and one waits: the quota is used up
    usage.METER.flush()
    before = Task.objects.filter(tenant=tenant).count()
    with pytest.raises(LimitExceeded) as refused:
        sends(agent)
    assert (refused.value.reason, refused.value.limit) == ("QUOTA_EXCEEDED", "runs_per_day")
    assert "used 3 of its 3 runs today" in refused.value.message
    assert 0 < refused.value.retry_after <= 86_400
    assert Task.objects.filter(tenant=tenant).count() == before
    usage.METER.flush()
    assert UsageDay.objects.get(tenant=tenant, agent=agent, day=usage.today()).refused_quota == 1


def test_a_tenant_alone_has_no_window_until_another_tenant_sends(
    settings, make_tenant, make_agent, published, sends
):
    """The window is a share: a tenant that sends alone hands every run to the broker, as
    without lanes; once another tenant has sent lately, the window applies to it again."""
    settings.A2A_LANE_CONTENTION_SECONDS = 60
    settings.A2A_LANE_WINDOW = 2
    alone, other = make_agent(make_tenant()), make_agent(make_tenant())
    burst = sends(alone, 4)
    assert published == burst and not Task.objects.filter(held=True).exists()

    sends(other)
    later = sends(alone, 2)
    assert Task.objects.filter(pk__in=later, held=True).count() == 2  # 4 in flight, past 2


def test_contention_is_another_tenants_send_within_the_setting(settings, monkeypatch):
    settings.A2A_LANE_CONTENTION_SECONDS = 60
    now = [1000.0]
    monkeypatch.setattr(lanes.clock, "time", lambda: now[0])
    seen = lanes.Contention()
    seen._sync = lambda now, seconds: None  # this process's sends alone
    assert seen.sent(1) is False and seen.sent(1) is False  # alone
    assert seen.sent(2) is True  # 1 sent just now
    assert seen.sent(2) is True and seen.sent(1) is True
    now[0] += 61
    assert seen.sent(1) is False  # 2 last sent 61 s ago
    assert seen.sent(3) is True and seen.sent(1) is True and seen.sent(2) is True
    settings.A2A_LANE_CONTENTION_SECONDS = 0
    assert lanes.Contention().sent(1) is True  # 0: the window always applies


def test_contention_counts_a_tenant_seen_by_another_process_within_a_second(
    settings, monkeypatch, make_tenant
):
    """Two web processes, each seeing one tenant's sends (its client keeps its connection
    there): each learns of the other's tenant through the database at its next share, at
    most SYNC_SECONDS later, and not once that tenant's last send is older than the setting."""
    settings.A2A_LANE_CONTENTION_SECONDS = 60
    now = [time.time()]
    monkeypatch.setattr(lanes.clock, "time", lambda: now[0])
    n, q = make_tenant().pk, make_tenant().pk
    web1, web2 = lanes.Contention(), lanes.Contention()
    assert web1.sent(n) is False  # shares: N sent at now
    assert web2.sent(q) is True  # its first send shares too, and reads N's
    now[0] += 0.5
    assert web1.sent(n) is False  # web1 shares again only a second after its last share
    now[0] += 0.6
    assert web1.sent(n) is True  # now it has read Q's send from web2
    now[0] += 61
    assert web1.sent(n) is False  # Q's last send is older than the setting
    assert LaneSender.objects.get(tenant_id=n).sent_at.timestamp() == pytest.approx(now[0])


def test_a_runs_last_write_reads_whether_its_tenants_lane_has_runs_waiting(
    settings, make_tenant, make_agent, sends
):
    """What the runtime's hand-over at a run's end goes by: read in the round trip of the
    write that ends the task (tasks_app.services.task_events_record)."""
    from tasks_app.services import task_events_record

    def end(task_id):
        task = Task.objects.get(pk=task_id)
        assert task_claim(task_id=task.pk, job_id=task.job_id, runner="w1") == "claimed"
        done = status(task.pk, TaskState.TASK_STATE_COMPLETED)
        return task_events_record(task_id=task.pk, events=[done])

    settings.A2A_LANE_WINDOW = 1
    agent = make_agent(make_tenant())
    first, second = sends(agent, 2)
    assert Task.objects.get(pk=second).held
    recorded = end(first)
    assert recorded.released and recorded.lane_waiting is True

    (alone,) = sends(make_agent(make_tenant()))
    recorded = end(alone)
    assert recorded.released and recorded.lane_waiting is False
