"""Delivering the outbox: per config, one delivery at a time, in event order.

A worker claims a config's next delivery with a conditional UPDATE (pending -> sending), POSTs
it through the SSRF-guarded client, and records the attempt. 2xx: delivered, on to the next.
Network errors, timeouts, 408, 429 and 5xx: retried later with exponential backoff and full
jitter (a `Retry-After` is honoured), and the config's later deliveries wait behind it, so a
receiver sees events in order. Any other answer (4xx, 3xx: redirects are not followed) is
permanent: the delivery is dead-lettered, and so is one out of attempts. An operator can
redeliver a dead delivery.
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

import httpx
from a2a.types import StreamResponse
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from google.protobuf.json_format import ParseDict

from a2a_platform.ssrf import UnsafeUrl, guarded_client
from a2a_platform.versions import V0_1, V1_0
from agents import usage
from agents.crypto import decrypt
from agents.signing import push_signature
from audit.services import event_record
from bindings.codecs import v01, v03
from tasks_app.models import TaskEvent
from tasks_app.selectors import task_artifact_ids
from tasks_app.streams import SETTLED_STATES, StreamItem, is_final

from .models import Delivery, DeliveryAttempt, PushConfig

logger = logging.getLogger(__name__)

TOKEN_HEADER = "X-A2A-Notification-Token"
SIGNATURE_HEADER = "X-A2A-Signature"
RETRYABLE_STATUSES = frozenset({408, 429})
# A delivery left `sending` this long was taken by a worker that died: it is due again.
SENDING_TIMEOUT = timedelta(minutes=5)


def push_payload(config: PushConfig, event: TaskEvent) -> bytes:
    """The event as the config's protocol version shapes it, with the codec its streams use:
    v1.0 StreamResponse JSON; v0.3's event (status-update / artifact-update with `kind`) marked
    `final` where a v0.3 stream would end; v0.1's result, its artifacts numbered as the task's."""
    if config.dialect == V1_0:
        return json.dumps(event.data).encode()
    item = StreamItem(
        task_id=config.task_id,
        seq=event.seq,
        response=ParseDict(event.data, StreamResponse()),
        final=is_final(event.kind, event.state, SETTLED_STATES),
    )
    if config.dialect == V0_1:
        render = v01.stream_renderer(
            task_artifact_ids(task_id=config.task_id),
            task_id=v01.v01_id_as_spelt(config.task_id, config.task.spelling),
        )
        (result,) = render(item)
    else:
        result = v03.push_event(item)
    return json.dumps(result).encode()


def _headers(config: PushConfig, body: bytes) -> dict[str, str]:
    """The request's headers: the config's secrets, decrypted here and nowhere else (no read of
    a config returns them), and the signature."""
    # v0.1's own headers first; the platform's come after.
    headers = json.loads(decrypt(config.headers_encrypted)) if config.headers_encrypted else {}
    headers.update({"Content-Type": "application/json", "User-Agent": "a2a-platform-push/1"})
    if config.token_encrypted:
        headers[TOKEN_HEADER] = decrypt(config.token_encrypted)
    if config.auth_scheme:
        credentials = (
            decrypt(config.auth_credentials_encrypted) if config.auth_credentials_encrypted else ""
        )
        headers["Authorization"] = f"{config.auth_scheme} {credentials}".strip()
    headers[SIGNATURE_HEADER] = push_signature(
        tenant=config.task.tenant, body=body, task_id=str(config.task_id)
    )
    return headers


def backoff_seconds(attempts: int, retry_after: float | None = None) -> float:
    """Full jitter over base * 2^(n-1), capped; never sooner than the receiver asked."""
    ceiling = min(
        settings.A2A_PUSH_BACKOFF_MAX_SECONDS,
        settings.A2A_PUSH_BACKOFF_BASE_SECONDS * 2 ** max(attempts - 1, 0),
    )
    delay = random.uniform(ceiling / 2, ceiling)
    return max(delay, retry_after or 0.0)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    if value.isdigit():
        return min(float(value), settings.A2A_PUSH_BACKOFF_MAX_SECONDS)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(
        0.0, min((when - timezone.now()).total_seconds(), settings.A2A_PUSH_BACKOFF_MAX_SECONDS)
    )


def _claim_next(config_pk: uuid.UUID) -> Delivery | None:
    """The config's first undelivered delivery, if it is due and nobody else holds it."""
    now = timezone.now()
    head = (
        Delivery.objects.filter(
            config_id=config_pk, state__in=[Delivery.State.PENDING, Delivery.State.SENDING]
        )
        .order_by("seq")
        .first()
    )
    if head is None:
        return None
    if head.state == Delivery.State.SENDING:
        if head.updated_at > now - SENDING_TIMEOUT:
            return None  # another worker is sending it
        claimed = Delivery.objects.filter(pk=head.pk, state=Delivery.State.SENDING).update(
            state=Delivery.State.SENDING, updated_at=now
        )
    else:
        if head.next_attempt_at > now:
            return None
        claimed = Delivery.objects.filter(pk=head.pk, state=Delivery.State.PENDING).update(
            state=Delivery.State.SENDING, updated_at=now
        )
    if claimed != 1:
        return None
    return Delivery.objects.select_related("config__task__tenant", "event").get(pk=head.pk)


def _finish(
    delivery: Delivery,
    *,
    started: datetime,
    latency_ms: int | None,
    status_code: int | None,
    error: str,
    outcome: str,
    retry_after: float | None = None,
) -> None:
    with transaction.atomic():
        DeliveryAttempt.objects.create(
            delivery=delivery,
            started_at=started,
            status_code=status_code,
            latency_ms=latency_ms,
            error=error[:2000],
            outcome=outcome,
        )
        delivery.attempts += 1
        delivery.last_status_code = status_code
        delivery.last_error = error[:2000]
        if outcome == "delivered":
            delivery.state = Delivery.State.DELIVERED
            delivery.delivered_at = timezone.now()
        elif outcome == "retry" and delivery.attempts < settings.A2A_PUSH_MAX_ATTEMPTS:
            delivery.state = Delivery.State.PENDING
            delivery.next_attempt_at = timezone.now() + timedelta(
                seconds=backoff_seconds(delivery.attempts, retry_after)
            )
        else:
            delivery.state = Delivery.State.DEAD
        delivery.save()


def _counted(config: PushConfig) -> None:
    """A POST attempted (answered or not) is the tenant's usage; an address the guard refused
    is not a POST."""
    usage.count(tenant_id=config.task.tenant_id, agent_id=config.task.agent_id, push_deliveries=1)


def _send(delivery: Delivery) -> str:
    """POST one delivery and record the attempt; its outcome."""
    config = delivery.config
    body = push_payload(config, delivery.event)
    started = timezone.now()
    clock = time.monotonic()
    try:
        with guarded_client() as client:
            response = client.post(config.url, content=body, headers=_headers(config, body))
    except UnsafeUrl as exc:
        _finish(delivery, started=started, latency_ms=None, status_code=None,
                error=exc.reason, outcome="dead")  # fmt: skip
        return "dead"
    except httpx.HTTPError as exc:
        latency = int((time.monotonic() - clock) * 1000)
        _counted(config)
        error = f"{type(exc).__name__}: {exc}" or type(exc).__name__
        _finish(delivery, started=started, latency_ms=latency, status_code=None,
                error=error, outcome="retry")  # fmt: skip
        return "retry"
    latency = int((time.monotonic() - clock) * 1000)
    _counted(config)
    status = response.status_code
    if 200 <= status < 300:
        outcome, error = "delivered", ""
    elif status in RETRYABLE_STATUSES or status >= 500:
        outcome, error = "retry", f"HTTP {status}: {response.text[:500]}"
    else:
        outcome, error = "dead", f"HTTP {status} is permanent: {response.text[:500]}"
    retry_after = _retry_after(response) if outcome == "retry" else None
    _finish(delivery, started=started, latency_ms=latency, status_code=status, error=error,
            outcome=outcome, retry_after=retry_after)  # fmt: skip
    return outcome


def deliveries_run(*, config_pk: uuid.UUID, budget: int = 50) -> datetime | None:
    """Send the config's due deliveries in order. Returns when to look again: a retry's time,
    or now if the budget ran out; None when nothing is left or another worker holds the head
    (that worker carries on down the line)."""
    for _ in range(budget):
        delivery = _claim_next(config_pk)
        if delivery is None:
            break
        _send(delivery)
    else:
        return timezone.now()
    head = (
        Delivery.objects.filter(
            config_id=config_pk, state__in=[Delivery.State.PENDING, Delivery.State.SENDING]
        )
        .order_by("seq")
        .first()
    )
    if head is None or head.state == Delivery.State.SENDING:
        return None
    return head.next_attempt_at if head.next_attempt_at > timezone.now() else None


def deliveries_due() -> list[uuid.UUID]:
    """Configs with a delivery due now, or one a dead worker left half-sent."""
    now = timezone.now()
    due = Delivery.objects.filter(state=Delivery.State.PENDING, next_attempt_at__lte=now)
    stale = Delivery.objects.filter(
        state=Delivery.State.SENDING, updated_at__lt=now - SENDING_TIMEOUT
    )
    return list(
        set(due.values_list("config_id", flat=True))
        | set(stale.values_list("config_id", flat=True))
    )


@transaction.atomic
def delivery_redeliver(*, delivery_id: uuid.UUID) -> bool:
    """An operator's retry of a dead delivery: pending again, attempts kept in the log, and the
    retry in the tenant's audit log (as whoever asked: the console's or the admin's person)."""
    updated = Delivery.objects.filter(pk=delivery_id, state=Delivery.State.DEAD).update(
        state=Delivery.State.PENDING, next_attempt_at=timezone.now(), updated_at=timezone.now()
    )
    if updated:
        config_pk, tenant_id, task_id, seq = Delivery.objects.values_list(
            "config_id", "config__task__tenant_id", "config__task_id", "seq"
        ).get(pk=delivery_id)
        event_record(
            tenant_id=tenant_id,
            action="redeliver",
            object_type="delivery",
            object_id=str(delivery_id),
            object_label=f"Task {task_id}, event {seq}",
            changes={"state": [Delivery.State.DEAD, Delivery.State.PENDING]},
        )
        from .tasks import push_deliver_task

        transaction.on_commit(lambda: push_deliver_task.delay(str(config_pk)), robust=True)
    return bool(updated)
