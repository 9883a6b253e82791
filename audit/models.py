"""The audit log: one row per change made to what tenants and operators configure, and one per
(tenant, agent, reason, hour) of refused credentials, counted."""

from __future__ import annotations

from typing import Any, NoReturn

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from .errors import AuditLogAppendOnly

# The action of the rows that count refused credentials (audit.failures).
AUTH_FAILURE = "auth.failure"
# What a secret is recorded as: set, and changed (audit.capture).
MASK = "••••"
CHANGED = "(changed)"


def _refused(what: str) -> NoReturn:
    raise AuditLogAppendOnly(
        f"The audit log is append-only: events are not {what} (retention deletes old ones)."
    )


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    """No update and no delete: the services that may (counting refused credentials into
    their hour's row, retention) say so by calling Django's own methods."""

    def update(self, **kwargs: Any) -> int:
        _refused("updated")

    def delete(self) -> tuple[int, dict[str, int]]:
        _refused("deleted")


class AuditEvent(models.Model):
    """Who changed what, when, from where, with the fields' values before and after (secrets
    masked); or, for `auth.failure`, how many calls a tenant's agent refused for one reason
    in one hour, from which addresses."""

    # No constraint and nothing done on delete: a tenant's log outlives the tenant (its own
    # deletion is in it) until retention takes it. Null: the platform's own (plans, accounts,
    # platform-wide issuers, console logins).
    tenant = models.ForeignKey(
        "agents.Tenant",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,  # the (tenant, at, id) index starts with it
    )
    at = models.DateTimeField(default=timezone.now, help_text="When (the first, for counts).")
    # `user:<username>`, `command:<name>`, `system`, `anonymous` or `unauthenticated`; kept as
    # written when the account goes.
    actor = models.CharField(max_length=200)
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    # The request's address (REMOTE_ADDR), `manage.py`, or "" for the platform's own work.
    source = models.CharField(max_length=100, blank=True)
    action = models.CharField(max_length=40)
    object_type = models.CharField(max_length=40)
    object_id = models.CharField(max_length=64, blank=True)
    object_label = models.CharField(max_length=300, blank=True)
    # Field -> [before, after]; None where there was no before (a create) or after (a delete).
    changes = models.JSONField(default=dict, blank=True)
    # Refused credentials (`auth.failure`): why, how many in the hour, the last one, and the
    # first few addresses they came from.
    reason = models.CharField(max_length=200, blank=True)
    count = models.PositiveIntegerField(default=1)
    last_at = models.DateTimeField(null=True, blank=True)
    sources = models.JSONField(default=list, blank=True)
    # The hour's row a count is added to (audit.failures): "" on every other row.
    bucket = models.CharField(max_length=64, blank=True, default="", editable=False)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "at", "id"], name="auditevent_tenant_at"),
            models.Index(fields=["at", "id"], name="auditevent_at"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["bucket"], condition=~Q(bucket=""), name="auditevent_bucket_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.object_type}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            _refused("changed")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refused("deleted")
