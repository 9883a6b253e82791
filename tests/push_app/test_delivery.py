"""The outbox's rules, without a network: backoff, Retry-After, claiming in order, redelivery."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from push_app.delivery import _claim_next, _retry_after, backoff_seconds, delivery_redeliver
from push_app.models import Delivery, PushConfig
from tasks_app.models import Task, TaskEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def config(make_tenant, make_agent):
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    task = Task.objects.create(
        tenant=tenant,
        agent=agent,
        context_id="c",
        owner="o",
        state="TASK_STATE_WORKING",
        status_timestamp=timezone.now(),
    )
    return PushConfig.objects.create(task=task, config_id="c1", url="https://example.com/h")


def _deliveries(config: PushConfig, count: int) -> list[Delivery]:
    made = []
    for seq in range(1, count + 1):
        event = TaskEvent.objects.create(task=config.task, seq=seq, kind="status_update", data={})
        made.append(
            Delivery.objects.create(
                config=config, event=event, seq=seq, next_attempt_at=timezone.now()
            )
        )
    return made


def test_backoff_doubles_with_jitter_up_to_the_cap(settings):
    settings.A2A_PUSH_BACKOFF_BASE_SECONDS = 30
    settings.A2A_PUSH_BACKOFF_MAX_SECONDS = 600
    for attempts, ceiling in ((1, 30), (2, 60), (3, 120), (5, 480), (6, 600), (20, 600)):
        for _ in range(50):
            assert ceiling / 2 <= backoff_seconds(attempts) <= ceiling
    assert backoff_seconds(1, retry_after=400) == 400  # never sooner than the receiver asked


def test_retry_after_in_seconds_or_as_a_date(settings):
    settings.A2A_PUSH_BACKOFF_MAX_SECONDS = 3600
    assert _retry_after(httpx.Response(503, headers={"Retry-After": "7"})) == 7
    assert _retry_after(httpx.Response(503, headers={"Retry-After": "999999"})) == 3600
    later = (timezone.now() + timedelta(seconds=120)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert 100 < _retry_after(httpx.Response(503, headers={"Retry-After": later})) <= 120
    assert _retry_after(httpx.Response(503, headers={"Retry-After": "soon"})) is None
    assert _retry_after(httpx.Response(503)) is None


def test_a_config_sends_one_delivery_at_a_time_in_event_order(config):
    first, second = _deliveries(config, 2)
    claimed = _claim_next(config.pk)
    assert claimed is not None and claimed.pk == first.pk
    assert _claim_next(config.pk) is None  # the first is being sent: the second waits
    Delivery.objects.filter(pk=first.pk).update(state=Delivery.State.DELIVERED)
    assert _claim_next(config.pk).pk == second.pk


def test_a_retry_not_yet_due_holds_back_the_later_deliveries(config):
    first, _ = _deliveries(config, 2)
    Delivery.objects.filter(pk=first.pk).update(
        next_attempt_at=timezone.now() + timedelta(minutes=1)
    )
    assert _claim_next(config.pk) is None


def test_a_delivery_a_dead_worker_left_sending_is_taken_again(config):
    (first,) = _deliveries(config, 1)
    stale = timezone.now() - timedelta(minutes=10)
    Delivery.objects.filter(pk=first.pk).update(state=Delivery.State.SENDING)
    Delivery.objects.filter(pk=first.pk).update(updated_at=stale)
    assert _claim_next(config.pk).pk == first.pk


def test_only_dead_deliveries_are_redelivered(config, django_capture_on_commit_callbacks):
    dead, delivered = _deliveries(config, 2)
    Delivery.objects.filter(pk=dead.pk).update(state=Delivery.State.DEAD)
    Delivery.objects.filter(pk=delivered.pk).update(state=Delivery.State.DELIVERED)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert delivery_redeliver(delivery_id=dead.pk) is True
        assert delivery_redeliver(delivery_id=delivered.pk) is False
    assert len(callbacks) == 1  # one job queued, for the redelivered one
    dead.refresh_from_db()
    assert dead.state == Delivery.State.PENDING


def test_a_new_config_hears_the_operators_event_kinds(config, settings):
    from a2a.types import TaskPushNotificationConfig

    from push_app.services import push_config_set

    settings.A2A_PUSH_EVENT_KINDS = ["status_update"]
    request = TaskPushNotificationConfig(id="only-status", url="https://example.com/h")
    push_config_set(task=config.task, config=request, dialect="1.0", checked=True)
    stored = PushConfig.objects.get(task=config.task, config_id="only-status")
    assert stored.event_kinds == ["status_update"]
