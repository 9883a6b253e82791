"""The console's ops pages: workers and queues (operators only, real broker and worker), failed
jobs recorded by the Celery signal, push deliveries scoped by tenant with redelivery by owners,
and the charts (numbers computed from known tasks, and the SVG functions themselves)."""

from __future__ import annotations

import html
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from a2a.types import (
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from a2a_platform.celery import app
from a2a_platform.queues import queue_depths
from console import charts
from console.models import JobFailure
from console.signals import job_failure_record
from push_app.delivery import deliveries_run
from push_app.models import Delivery, DeliveryAttempt, PushConfig
from push_app.tasks import push_deliver_task
from tasks_app.models import Task
from tasks_app.services import task_event_record
from tests.conftest import require
from tests.factories import task_create

# --- data ----------------------------------------------------------------------------------


def working(task: Task) -> None:
    """A status event: the task's push config gets a delivery for it in the outbox."""
    event = TaskStatusUpdateEvent(
        task_id=str(task.pk),
        context_id=task.context_id,
        status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
    )
    assert task_event_record(task_id=task.pk, event=event)


class _Receiver(BaseHTTPRequestHandler):
    status = 410

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.end_headers()
        self.wfile.write(b"gone for good")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver(settings) -> Iterator[ThreadingHTTPServer]:
    """A webhook receiver on a real socket that answers 410 Gone (a permanent refusal)."""
    settings.A2A_PUSH_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.status = 410  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def dead_delivery(agent: Any, receiver: ThreadingHTTPServer) -> Delivery:
    """A delivery really POSTed to the receiver, refused, and so dead-lettered."""
    task = task_create(agent, push_url=f"http://127.0.0.1:{receiver.server_address[1]}/hook")
    working(task)
    config = PushConfig.objects.get(task=task)
    deliveries_run(config_pk=config.pk)
    delivery = Delivery.objects.get(config=config)
    assert delivery.state == Delivery.State.DEAD
    return delivery


@pytest.fixture
def deliveries(world, receiver) -> dict[str, Delivery]:
    """A's dead delivery, A's pending one, and B's dead one."""
    dead_a = dead_delivery(world["agent_a"], receiver)
    pending_task = task_create(world["agent_a"], push_url="http://127.0.0.1:9/later")
    working(pending_task)
    pending_a = Delivery.objects.get(config__task=pending_task)
    dead_b = dead_delivery(world["agent_b"], receiver)
    return {"dead_a": dead_a, "pending_a": pending_a, "dead_b": dead_b}


def page(client: Client, url: str, **query: str) -> str:
    response = client.get(url, query)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


# --- workers -------------------------------------------------------------------------------


def test_the_workers_page_is_for_operators_only(client, world):
    url = reverse("console:workers")
    assert client.get(url).status_code == 302  # anonymous: to the login page
    for name in ("owner_a", "member_a"):
        client.force_login(world[name])
        assert client.get(url).status_code == 403
    client.force_login(world["operator"])
    assert client.get(url).status_code == 200


@pytest.fixture
def broker_of_its_own(settings, monkeypatch) -> Iterator[str]:
    """The Celery app pointed at a Redis database no worker reads, so messages published there
    stay queued even while another test's worker runs on the suite's broker."""
    shared = app.conf.broker_url
    require(shared.startswith("redis://"), "needs the Redis broker that scripts/test.sh starts")
    own = shared.rsplit("/", 1)[0] + "/9"
    use_broker(own, settings, monkeypatch)
    try:
        with app.connection_for_write() as connection:
            connection.default_channel.client.flushdb()
        yield own
    finally:
        with app.connection_for_write() as connection:
            connection.default_channel.client.flushdb()


def use_broker(url: str, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the platform's Celery app at another broker for one test. Celery reads these
    environment variables before its own config (which another test may have pinned). Its
    producer pool, which control broadcasts use, is made first, on the suite's broker, so no
    later test publishes to this one."""
    app.pool  # noqa: B018
    for name in ("CELERY_BROKER_URL", "CELERY_BROKER_READ_URL", "CELERY_BROKER_WRITE_URL"):
        monkeypatch.setenv(name, url)
    settings.CELERY_BROKER_URL = url
    assert app.conf.broker_read_url == app.conf.broker_write_url == url


def test_queue_depth_counts_the_messages_waiting_in_redis(client, world, broker_of_its_own):
    # given: three jobs for a task no worker runs, published with the platform's Celery app
    queue = app.conf.task_default_queue
    assert queue_depths()[queue] == 0
    with app.connection_for_write() as connection:
        for n in range(3):
            app.send_task("console.tests.nobody_runs_this", args=[n], connection=connection)
    assert queue_depths()[queue] == 3
    # when
    client.force_login(world["operator"])
    body = page(client, reverse("console:workers"))
    # then
    assert f'<tr data-queue="{queue}"><td class="mono">{queue}</td>' in body
    assert re.search(rf'data-queue="{queue}">.*?data-depth="3">3</td>', body)
    assert "The broker is unreachable" not in body


def closed_port() -> int:
    """A local port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_broker_is_said_on_the_page_not_a_500(client, world, settings, monkeypatch):
    use_broker(f"redis://127.0.0.1:{closed_port()}/0", settings, monkeypatch)
    client.force_login(world["operator"])
    started = time.monotonic()
    body = page(client, reverse("console:workers"))
    elapsed = time.monotonic() - started
    assert 'id="broker-down"' in body and "The broker is unreachable" in body
    assert "Connection refused" in body or "Error 111" in body
    assert elapsed < 10  # bounded, not kombu's minute of retries
    assert 'id="failures"' in body  # the rest of the page is still there


def test_a_failing_celery_task_is_recorded_by_the_signal(db):
    # A real task of the platform run through Celery's tracer (in this process): a bad id.
    job_id = str(uuid.uuid4())
    result = push_deliver_task.apply(args=["not-a-uuid"], task_id=job_id)
    assert result.failed()
    failure = JobFailure.objects.get(celery_task_id=job_id)
    assert failure.task_name == "push_app.tasks.push_deliver_task"
    assert failure.exception_type == "ValueError"
    assert "badly formed hexadecimal UUID string" in failure.exception_message
    assert failure.args_repr == "['not-a-uuid']"
    assert "uuid.UUID(config_id)" in failure.traceback
    assert failure.failed_at <= timezone.now()


def test_job_failures_are_pruned_to_the_newest_and_cut_to_size(db):
    for n in range(5):
        job_failure_record(
            celery_task_id=f"job-{n}",
            task_name="t",
            args_repr="x" * 5000,
            kwargs_repr="{}",
            exception=RuntimeError("boom " * 1000),
            traceback_text="".join(f"frame {i}\n" for i in range(5000)) + "RuntimeError: boom",
            worker_hostname="w@h",
            kept=3,
        )
    kept = list(JobFailure.objects.values_list("celery_task_id", flat=True))
    assert kept == ["job-4", "job-3", "job-2"]
    newest = JobFailure.objects.first()
    assert len(newest.args_repr) == 1000 and newest.args_repr.endswith("…")
    assert len(newest.exception_message) == 2000
    assert newest.traceback.endswith("RuntimeError: boom")  # the end of a traceback is kept
    assert newest.traceback.startswith("…") and len(newest.traceback) == 8000


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_job_failing_on_a_real_worker_is_shown_with_the_live_worker(
    live_platform, client, django_user_model
):
    # given: a job of a real task the worker runs, with an argument it cannot take
    job_id = str(uuid.uuid4())
    app.send_task("push_app.tasks.push_deliver_task", args=["not-a-uuid"], task_id=job_id)
    deadline = time.monotonic() + 30
    while not JobFailure.objects.filter(celery_task_id=job_id).exists():
        assert time.monotonic() < deadline, "the worker recorded no failure"
        time.sleep(0.1)
    failure = JobFailure.objects.get(celery_task_id=job_id)
    assert failure.exception_type == "ValueError"
    assert failure.worker_hostname.startswith("push@")  # deliveries have their own workers
    # when
    operator = django_user_model.objects.create_user("op", password="pw", is_staff=True)
    client.force_login(operator)
    body = page(client, reverse("console:workers"))
    # then: the failure with its error, and the worker that answered the broadcast
    row = re.search(rf'<tr class="failure" data-job="{job_id}">(.*?)</tr>', body, re.S)
    assert row is not None
    assert "push_app.tasks.push_deliver_task" in row.group(1)
    assert "ValueError" in row.group(1) and "badly formed hexadecimal UUID string" in row.group(1)
    assert html.escape(failure.worker_hostname) in row.group(1)
    assert f'data-worker="{failure.worker_hostname}"' in body
    assert "answered in" in body and "No worker answered" not in body
    # and that worker's counts by job kind include the failed job, with its duration
    worker = body.split(f'data-worker="{failure.worker_hostname}"', 1)[1].split('class="worker"')[0]
    kind = re.search(r'<tr data-kind="push_app.tasks.push_deliver_task">(.*?)</tr>', worker, re.S)
    assert kind is not None, "no per-kind row for the push job on its worker"
    finished, failed, mean, longest = re.findall(
        r'<td class="num"[^>]*>([^<]*)</td>', kind.group(1)
    )
    assert int(finished) >= 1 and int(failed) >= 1, kind.group(1)
    assert mean.endswith(" s") and float(longest.removesuffix(" s")) >= 0


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_revoked_job_is_never_run_by_the_worker_that_holds_it(
    live_platform, client, django_user_model
):
    # given: a job due in 4 s (an ETA) that would fail, and be recorded, if it ran
    job_id = str(uuid.uuid4())
    app.send_task(
        "push_app.tasks.push_deliver_task", args=["not-a-uuid"], task_id=job_id, countdown=4
    )
    operator = django_user_model.objects.create_user("op", password="pw", is_staff=True)
    client.force_login(operator)
    # when: the operator revokes it from the workers page
    response = client.post(reverse("console:job-revoke"), {"job": job_id}, follow=True)
    assert any("revoked" in str(m) for m in response.context["messages"])
    # then: the workers hold it as revoked, and its time passes without it running
    revoked = app.control.inspect(timeout=2).revoked() or {}
    assert any(job_id in ids for ids in revoked.values()), revoked
    time.sleep(6)
    assert not JobFailure.objects.filter(celery_task_id=job_id).exists()


@pytest.mark.django_db(transaction=True)  # beat writes outside any request's transaction
def test_beats_last_tick_is_on_the_workers_page_and_a_late_one_is_said(client, world):
    from a2a_platform.beat import beat_tick_record
    from console.models import BeatHeartbeat

    client.force_login(world["operator"])
    assert beat_tick_record()
    body = page(client, reverse("console:workers"))
    assert 'id="beat" data-alive="true"' in body and "Last ticked" in body
    BeatHeartbeat.objects.update(ticked_at=timezone.now() - timedelta(minutes=5))
    body = page(client, reverse("console:workers"))
    assert 'data-alive="false"' in body and "Is the beat process running?" in body


# --- push deliveries -----------------------------------------------------------------------


def test_a_member_sees_the_deliveries_of_their_tenant_only(client, world, deliveries):
    client.force_login(world["member_a"])
    body = page(client, reverse("console:deliveries"))
    assert str(deliveries["dead_a"].pk) in body and str(deliveries["pending_a"].pk) in body
    assert str(deliveries["dead_b"].pk) not in body and world["b"].slug not in body
    assert 'data-state="dead" data-count="1"' in body
    assert 'data-state="pending" data-count="1"' in body
    # the dead letter is highlighted, with what the receiver answered
    row = re.search(rf'<tr class="delivery dead" data-delivery="{deliveries["dead_a"].pk}"', body)
    assert row is not None
    assert "HTTP 410 is permanent" in body
    # B's delivery and its redelivery are 404 to A's member, as if they did not exist
    dead_b = deliveries["dead_b"].pk
    assert client.get(reverse("console:delivery", args=[dead_b])).status_code == 404
    assert client.post(reverse("console:delivery-redeliver", args=[dead_b])).status_code == 404
    # the operator sees both tenants
    client.force_login(world["operator"])
    body = page(client, reverse("console:deliveries"))
    assert str(deliveries["dead_a"].pk) in body and str(deliveries["dead_b"].pk) in body


def test_deliveries_filter_by_state_and_agent(client, world, deliveries):
    client.force_login(world["operator"])
    url = reverse("console:deliveries")
    body = page(client, url, state="pending")
    assert str(deliveries["pending_a"].pk) in body
    assert str(deliveries["dead_a"].pk) not in body and str(deliveries["dead_b"].pk) not in body
    body = page(client, url, agent=f"{world['b'].slug}/beta")
    assert str(deliveries["dead_b"].pk) in body
    assert str(deliveries["dead_a"].pk) not in body
    assert 'data-state="dead" data-count="1"' in body
    assert 'data-state="pending" data-count="0"' in body
    # a member naming another tenant's agent gets 404, not an empty list
    client.force_login(world["member_a"])
    assert client.get(url, {"agent": f"{world['b'].slug}/beta"}).status_code == 404


def test_a_bad_state_filter_is_explained_on_the_page_and_shows_no_rows(client, world, deliveries):
    client.force_login(world["operator"])
    url = reverse("console:deliveries")
    for value in ("gone", "<b>DEAD</b>", "x" * 5000):
        response = client.get(url, {"state": value})
        assert response.status_code == 200, value[:50]
        body = response.content.decode()
        box = re.search(r'<ul class="messages" id="filter-errors">(.*?)</ul>', body, re.S)
        assert box is not None, value[:50]
        assert "<b>" not in box.group(1)  # the value is escaped, never markup
        problem = html.unescape(re.sub(r"<[^>]+>", "", box.group(1))).strip()
        shown = value if len(value) <= 40 else value[:40] + "…"
        assert problem == (
            f"State (state): {shown} is not a delivery state; pick one from the list "
            "(pending, sending, delivered, dead)."
        )
        # no rows rather than every delivery, and the counts by state are still there
        assert "data-delivery=" not in body and "No deliveries shown: fix the filter" in body
        assert 'data-state="dead" data-count="2"' in body
    # a good state after a bad one filters as before, with no message
    body = page(client, url, state="dead")
    assert 'id="filter-errors"' not in body
    assert str(deliveries["dead_a"].pk) in body and str(deliveries["pending_a"].pk) not in body


def test_a_delivery_page_shows_its_attempts(client, world, deliveries):
    dead = deliveries["dead_a"]
    attempt = DeliveryAttempt.objects.get(delivery=dead)
    client.force_login(world["member_a"])
    body = page(client, reverse("console:delivery", args=[dead.pk]))
    row = re.search(r'<tr class="attempt o-dead">(.*?)</tr>', body, re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    assert cells[1] == "410"
    assert cells[2] == f"{attempt.latency_ms} ms"
    assert "dead" in cells[3] and "HTTP 410 is permanent: gone for good" in cells[4]
    assert cells[0].startswith(timezone.localtime(attempt.started_at).strftime("%Y-%m-%d %H:%M"))
    # a member looks but cannot redeliver
    assert 'id="redeliver"' not in body and "Only the tenant's owners" in body


def test_an_owner_redelivers_a_dead_delivery_and_a_member_cannot(
    world, deliveries, django_capture_on_commit_callbacks
):
    dead = deliveries["dead_a"]
    url = reverse("console:delivery-redeliver", args=[dead.pk])
    detail = reverse("console:delivery", args=[dead.pk])
    member = Client(enforce_csrf_checks=True)
    member.force_login(world["member_a"])
    token = csrf_token(member, detail)
    assert member.post(url, {"csrfmiddlewaretoken": token}).status_code == 403
    dead.refresh_from_db()
    assert dead.state == Delivery.State.DEAD

    owner = Client(enforce_csrf_checks=True)
    owner.force_login(world["owner_a"])
    assert owner.get(url).status_code == 405  # a change is a POST
    assert owner.post(url).status_code == 403  # without the CSRF token
    dead.refresh_from_db()
    assert dead.state == Delivery.State.DEAD
    body = page(owner, detail)
    assert 'id="redeliver"' in body
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = owner.post(url, {"csrfmiddlewaretoken": csrf_token(owner, detail)})
    assert response.status_code == 302 and response["Location"] == detail
    dead.refresh_from_db()
    assert dead.state == Delivery.State.PENDING and dead.attempts == 1
    assert len(queued) == 1  # push_app's redelivery queued the config's delivery job
    body = page(owner, detail)
    assert "Delivery queued again" in body and 'id="redeliver"' not in body
    # a second redelivery of the same (now pending) delivery changes nothing and says so
    response = owner.post(url, {"csrfmiddlewaretoken": csrf_token(owner, detail)}, follow=True)
    assert "Only dead deliveries are redelivered; this one is pending" in response.content.decode()


def test_an_operator_redelivers_any_tenants_delivery(client, world, deliveries):
    client.force_login(world["operator"])
    dead_b = deliveries["dead_b"]
    response = client.post(reverse("console:delivery-redeliver", args=[dead_b.pk]))
    assert response.status_code == 302
    dead_b.refresh_from_db()
    assert dead_b.state == Delivery.State.PENDING


def csrf_token(client: Client, url: str) -> str:
    body = page(client, url)
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', body)
    assert match is not None
    return match.group(1)


# --- charts --------------------------------------------------------------------------------


def finished_at(task: Task, *, end: datetime, seconds: float, state: str) -> None:
    Task.objects.filter(pk=task.pk).update(
        state=state, created_at=end - timedelta(seconds=seconds), status_timestamp=end
    )


@pytest.fixture
def known_tasks(world) -> datetime:
    """Alpha (A): ten tasks created in one bucket, eight finished there after 1..8 s (one
    failed, one rejected), two still working. Beta (B): three failed tasks at the same time."""
    anchor = timezone.now() - timedelta(hours=3)
    hour = anchor.replace(minute=30, second=0, microsecond=0)  # mid-bucket, whatever `now` is
    states = ["TASK_STATE_COMPLETED"] * 6 + ["TASK_STATE_FAILED", "TASK_STATE_REJECTED"]
    for seconds, state in zip(range(1, 9), states, strict=True):
        finished_at(task_create(world["agent_a"]), end=hour, seconds=seconds, state=state)
    for _ in range(2):
        Task.objects.filter(pk=task_create(world["agent_a"]).pk).update(
            state="TASK_STATE_WORKING", created_at=hour, status_timestamp=hour
        )
    for _ in range(3):
        finished_at(task_create(world["agent_b"]), end=hour, seconds=100, state="TASK_STATE_FAILED")
    return hour


def stat(body: str, agent: str, name: str) -> str:
    section = re.search(rf'data-agent="{agent}">(.*?)</section>', body, re.S)
    assert section is not None, agent
    value = re.search(rf'data-stat="{name}">(.*?)</td>', section.group(1))
    assert value is not None, name
    return value.group(1)


def test_charts_show_throughput_latency_and_errors_of_known_tasks(client, world, known_tasks):
    client.force_login(world["member_a"])
    body = page(client, reverse("console:charts"))  # default range: 24h
    alpha = f"{world['a'].slug}/alpha"
    assert stat(body, alpha, "created") == "10"
    assert stat(body, alpha, "finished") == "8"
    assert stat(body, alpha, "errors") == "2"
    assert stat(body, alpha, "error-rate") == "25.0%"
    # durations 1..8 s: p50 = 4.5, p95 = 7 + 0.65, p99 = 7 + 0.93 (linear interpolation)
    assert stat(body, alpha, "p50") == "4.50 s"
    assert stat(body, alpha, "p95") == "7.65 s"
    assert stat(body, alpha, "p99") == "7.93 s"
    section = re.search(rf'data-agent="{alpha}">(.*?)</section>', body, re.S).group(1)
    assert section.count("<svg") == 3
    # in the SVG: a bar of 10 created, the bucket's p50 point, the bucket's 25% error rate
    point = r'<{} [^>]*data-series="{}" data-bucket="\d+" data-value="{}">'
    assert re.search(point.format("rect", "created", "10"), section)
    assert re.search(point.format("circle", "p50", "4.5"), section)
    assert re.search(point.format("circle", "error rate", "25"), section)
    assert "<script" not in body.split("<main>")[1]  # server-drawn: no script on the page
    # B's agent is not A's member's to see
    assert "beta" not in body and world["b"].slug not in body


def test_charts_follow_the_range_and_the_agent_filter(client, world, known_tasks):
    client.force_login(world["operator"])
    url = reverse("console:charts")
    alpha, beta = f"{world['a'].slug}/alpha", f"{world['b'].slug}/beta"
    body = page(client, url, range="1h")  # the tasks are three hours old
    assert f'data-agent="{alpha}"' not in body and "No tasks" in body
    body = page(client, url, range="7d")
    assert stat(body, alpha, "created") == "10" and stat(body, beta, "error-rate") == "100.0%"
    assert stat(body, beta, "p50") == "1.7 min"
    body = page(client, url, agent=beta)
    assert f'data-agent="{beta}"' in body and f'data-agent="{alpha}"' not in body
    client.force_login(world["member_a"])
    assert client.get(url, {"agent": beta}).status_code == 404


def y_axis(svg: str) -> tuple[str, list[str]]:
    """A chart's axis label and its y tick labels (right-aligned, bottom up)."""
    label = re.search(r'<text class="axis-label"[^>]*>([^<]*)</text>', svg)
    assert label is not None
    return label.group(1), re.findall(r'<text class="tick"[^>]*text-anchor="end">([^<]*)<', svg)


def test_the_latency_axis_is_labelled_in_the_unit_of_its_ticks(client, world, known_tasks):
    client.force_login(world["operator"])
    body = page(client, reverse("console:charts"), range="7d")
    for agent, unit, ticks in (
        (f"{world['a'].slug}/alpha", "seconds", ["0", "2", "4", "6", "8"]),  # 1..8 s
        (f"{world['b'].slug}/beta", "minutes", ["0", "0.5", "1", "1.5", "2"]),  # 100 s
    ):
        section = re.search(rf'data-agent="{agent}">(.*?)</section>', body, re.S).group(1)
        latency = next(svg for svg in re.findall(r"<svg.*?</svg>", section, re.S) if "p50" in svg)
        assert y_axis(latency) == (unit, ticks), agent


def test_charts_read_at_most_a_sample_of_durations_per_bucket(client, world, monkeypatch):
    from console import views_ops

    monkeypatch.setattr(views_ops, "MAX_DURATION_ROWS", 0)
    monkeypatch.setattr(views_ops, "MIN_DURATIONS_PER_BUCKET", 3)
    hour = (timezone.now() - timedelta(hours=2)).replace(minute=30, second=0, microsecond=0)
    for seconds in range(1, 6):
        finished_at(
            task_create(world["agent_a"]), end=hour, seconds=seconds, state="TASK_STATE_COMPLETED"
        )
    client.force_login(world["owner_a"])
    body = page(client, reverse("console:charts"))
    alpha = f"{world['a'].slug}/alpha"
    assert stat(body, alpha, "finished") == "5"
    assert stat(body, alpha, "p50").startswith("≈ ")  # from 3 of the 5 durations
    assert "come from a sample" in body


# --- console.charts ------------------------------------------------------------------------


def test_percentile_interpolates_between_ranks():
    assert charts.percentile([], 50) is None
    assert charts.percentile([7.0], 99) == 7.0
    assert charts.percentile([4, 1, 3, 2], 50) == 2.5
    assert charts.percentile(list(range(1, 101)), 95) == pytest.approx(95.05)
    assert charts.percentile([1, 2, 3], 0) == 1 and charts.percentile([1, 2, 3], 100) == 3
    with pytest.raises(ValueError):
        charts.percentile([1], 101)


def test_buckets_are_aligned_and_hold_now_in_the_last():
    now = datetime(2025, 3, 4, 15, 47, 12, tzinfo=UTC)
    day = charts.buckets_for("24h", now)
    assert (day.count, day.size) == (24, timedelta(hours=1))
    assert day.start == datetime(2025, 3, 3, 16, 0, tzinfo=UTC)
    assert day.end == datetime(2025, 3, 4, 16, 0, tzinfo=UTC)
    assert day.index(now) == 23 and day.index(day.start) == 0 and day.index(day.end) is None
    assert day.labels()[:2] == ["16:00", "17:00"]
    hour = charts.buckets_for("1h", now)
    assert (hour.count, hour.size) == (24, timedelta(seconds=150))
    assert hour.end == datetime(2025, 3, 4, 15, 47, 30, tzinfo=UTC)
    week = charts.buckets_for("7d", now)
    assert (week.count, week.start) == (28, datetime(2025, 2, 25, 18, 0, tzinfo=UTC))
    assert week.labels()[0] == "Tue 18:00"
    assert len(week.edges()) == 29


def test_agent_series_computes_rates_percentiles_and_sampling():
    series = charts.agent_series(
        created=[3, 0], finished=[4, 0], errors=[1, 0], durations=[[1.0, 2.0, 3.0], []]
    )
    assert series.error_rate == [25.0, None]
    assert series.latency[50] == [2.0, None]
    assert series.sampled == [True, False]  # 3 durations read of 4 finished
    with pytest.raises(ValueError):
        charts.agent_series(created=[1], finished=[], errors=[], durations=[])


def test_nice_ticks_are_round_and_reach_the_top():
    assert charts.nice_ticks(0) == [0.0, 1.0]
    assert charts.nice_ticks(10) == [0.0, 2.5, 5.0, 7.5, 10.0]
    assert charts.nice_ticks(7.93) == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert charts.nice_ticks(101)[-1] >= 101
    # counts: whole steps only
    assert charts.nice_ticks(1, whole=True) == [0.0, 1.0]
    assert charts.nice_ticks(3, whole=True) == [0.0, 1.0, 2.0, 3.0]
    assert charts.nice_ticks(10, whole=True) == [0.0, 5.0, 10.0]


def test_line_chart_escapes_text_breaks_at_gaps_and_carries_values():
    svg = charts.line_chart(
        title="<script>alert(1)</script> & co",
        x_labels=["a", "b", "c", "d"],
        series=[charts.Series("p50 <b>", [1.0, 2.0, None, 4.0])],
        y_label="seconds",
        fmt=charts.format_seconds,
    )
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "<script>" not in svg and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in svg
    assert "p50 &lt;b&gt;" in svg and "<b>" not in svg
    assert svg.count("<polyline") == 1  # a, b joined; d alone after the gap
    assert svg.count("<circle") == 3
    assert 'data-bucket="3" data-value="4"' in svg
    assert "<title>b p50 &lt;b&gt;: 2.00 s</title>" in svg
    assert '<rect x="' in svg  # the legend's swatch
    with pytest.raises(ValueError):
        charts.line_chart(title="t", x_labels=["a"], series=[charts.Series("s", [])], y_label="")


def test_latency_chart_writes_its_ticks_in_the_unit_under_its_axis():
    def chart(*values: float | None) -> str:
        labels = [str(i) for i in range(len(values))]
        return charts.latency_chart(
            title="t", x_labels=labels, series=[charts.Series("p50", list(values))]
        )

    # under a second: milliseconds, round ones, with no unit on each tick
    fast = chart(0.12, None, 0.8)
    assert y_axis(fast) == ("milliseconds", ["0", "200", "400", "600", "800"])
    # each point's tooltip still says its own value with its unit; data-value stays seconds
    assert "<title>2 p50: 800 ms</title>" in fast and 'data-value="0.8"' in fast
    assert y_axis(chart(1.5, 7.93)) == ("seconds", ["0", "2", "4", "6", "8"])
    assert y_axis(chart(100.0)) == ("minutes", ["0", "0.5", "1", "1.5", "2"])
    assert y_axis(chart(5 * 3600.0)) == ("hours", ["0", "2", "4", "6"])
    assert y_axis(chart(None, None)) == ("seconds", ["0", "1"])  # no data
    assert charts.duration_unit(59.9) == ("seconds", 1.0)
    assert charts.duration_unit(60) == ("minutes", 60.0)


def test_a_long_chart_title_is_cut_in_its_subject_and_whole_in_the_tooltip():
    def shown(title: str) -> str:
        svg = charts.bar_chart(title=title, x_labels=["a"], values=[1], y_label="n", name="made")
        assert f"<title>{html.escape(title)}</title>" in svg
        return re.search(r'<text class="chart-title"[^>]*>([^<]*)</text>', svg).group(1)

    # the subject (an agent's path) loses its middle; what the chart shows stays whole
    what = ": error rate (failed + rejected of finished)"
    cut = shown("t" + "x" * 200 + "y" + what)
    assert len(cut) == charts.TITLE_CHARS and cut.endswith("xy" + what)
    assert cut.startswith("txxx") and cut.count("…") == 1
    # a title with no subject, or too long a what, is cut in its middle
    plain = shown("a" * 100 + "b" * 100)
    assert len(plain) == charts.TITLE_CHARS and plain.startswith("aaa") and plain.endswith("bbb")
    short = charts.bar_chart(title="t: made", x_labels=["a"], values=[1], y_label="n", name="m")
    assert '<text class="chart-title" x="64" y="16">t: made</text>' in short


def test_bar_chart_draws_one_bar_per_bucket_and_says_when_empty():
    svg = charts.bar_chart(title="t", x_labels=["x", "y"], values=[3, 0], y_label="n", name="made")
    bars = re.findall(r'<rect [^>]*data-series="made"[^>]*>', svg)
    assert len(bars) == 2 and 'data-value="3"' in bars[0] and 'height="0.0"' in bars[1]
    assert "no data" not in svg
    empty = charts.bar_chart(title="t", x_labels=["x"], values=[0], y_label="n", name="made")
    assert "no data" in empty
