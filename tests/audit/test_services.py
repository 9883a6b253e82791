"""The audit log is append-only (no update, no delete through the ORM but retention's), keeps
a tenant's events after the tenant is gone, and follows the tasks' retention in bounded
batches on beat's hourly job; its admin only shows it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from audit.context import Actor, acting_as
from audit.errors import AuditLogAppendOnly
from audit.models import AUTH_FAILURE, AuditEvent
from audit.services import event_record, events_delete_expired
from audit.tasks import delete_expired_audit_events_task

pytestmark = pytest.mark.django_db


def test_an_event_cannot_be_changed_or_deleted(make_tenant):
    tenant = make_tenant()
    event = AuditEvent.objects.filter(tenant_id=tenant.pk).first()
    assert event is not None  # the tenant's creation
    event.actor = "user:someone-else"
    with pytest.raises(AuditLogAppendOnly):
        event.save()
    with pytest.raises(AuditLogAppendOnly):
        event.delete()
    with pytest.raises(AuditLogAppendOnly):
        AuditEvent.objects.filter(pk=event.pk).update(actor="x")
    with pytest.raises(AuditLogAppendOnly):
        AuditEvent.objects.filter(pk=event.pk).delete()
    with pytest.raises(AuditLogAppendOnly), transaction.atomic():  # its own savepoint
        AuditEvent.objects.bulk_update([event], ["actor"])
    event.refresh_from_db()
    assert event.actor == "system"


def test_a_tenants_log_outlives_the_tenant(make_tenant, make_agent):
    tenant = make_tenant()
    make_agent(tenant, "short-lived")
    tenant_id = tenant.pk
    with acting_as(Actor("user:root")):
        tenant.delete()
    kinds = list(
        AuditEvent.objects.filter(tenant_id=tenant_id)
        .exclude(action=AUTH_FAILURE)
        .order_by("pk")
        .values_list("object_type", "action")
    )
    assert kinds == [
        ("tenant", "create"),
        ("agent", "create"),
        ("agent", "delete"),
        ("tenant", "delete"),
    ]


def test_an_account_deleted_leaves_its_name_on_what_it_did(make_tenant):
    person = get_user_model().objects.create_user("leaving")
    tenant = make_tenant()
    with acting_as(Actor("user:leaving", person.pk, "192.0.2.1")):
        event = event_record(tenant_id=tenant.pk, action="update", object_type="tenant")
    person.delete()
    event.refresh_from_db()
    assert (event.actor, event.actor_user_id, event.source) == ("user:leaving", None, "192.0.2.1")


def _old(n: int, days: int) -> list[int]:
    """n events `days` old: written as they are, then moved back in time as a test may."""
    ids = [event_record(tenant_id=None, action="update", object_type="plan").pk for _ in range(n)]
    from django.db import models

    models.QuerySet.update(
        AuditEvent.objects.filter(pk__in=ids), at=timezone.now() - timedelta(days=days)
    )
    return ids


def test_retention_follows_the_tasks_in_bounded_batches(settings):
    settings.A2A_TASK_RETENTION_DAYS = 0
    old = _old(5, days=40)
    recent = _old(2, days=10)
    assert events_delete_expired() == 0  # retention off: everything is kept
    settings.A2A_TASK_RETENTION_DAYS = 30
    assert events_delete_expired(batch=2) == 2  # the oldest first, a batch at a time
    assert delete_expired_audit_events_task() == 3  # beat's job: batches until none is left
    assert not AuditEvent.objects.filter(pk__in=old).exists()
    assert AuditEvent.objects.filter(pk__in=recent).count() == 2


def test_beat_runs_retention_hourly_on_the_maintenance_queue(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["delete-expired-audit-events"]
    assert entry == {"task": "audit.tasks.delete_expired_audit_events_task", "schedule": 3600.0}
    assert settings.CELERY_TASK_ROUTES[entry["task"]] == {"queue": "maintenance"}
    assert settings.CELERY_BEAT_SCHEDULE["delete-expired-tasks"]["schedule"] == entry["schedule"]


def test_the_admin_shows_the_log_and_changes_nothing(client, make_tenant):
    operator = get_user_model().objects.create_superuser("root", "r@example.com", "pw-12345678")
    client.force_login(operator)
    tenant = make_tenant()
    event = AuditEvent.objects.filter(tenant_id=tenant.pk).first()
    listing = client.get("/admin/audit/auditevent/", {"action__exact": "create"})
    assert listing.status_code == 200 and tenant.slug in listing.content.decode()
    page = client.get(f"/admin/audit/auditevent/{event.pk}/change/")
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    assert client.get("/admin/audit/auditevent/add/").status_code == 403
    assert (
        client.post(f"/admin/audit/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert AuditEvent.objects.filter(pk=event.pk).exists()
