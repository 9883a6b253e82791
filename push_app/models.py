"""Push notification configs, the delivery outbox, and the log of every delivery attempt."""

from __future__ import annotations

import uuid

from django.db import models


class PushConfig(models.Model):
    """Where a task's events are POSTed. Secrets (token, credentials, v0.1's headers) are
    encrypted at rest, and decrypted only to deliver: no read of a config returns them."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    task = models.ForeignKey("tasks_app.Task", on_delete=models.CASCADE, related_name="+")
    # The id clients use: chosen by the client, or generated.
    config_id = models.CharField(max_length=200)
    url = models.CharField(max_length=2048)
    token_encrypted = models.TextField(blank=True)
    auth_scheme = models.CharField(max_length=100, blank=True)
    auth_credentials_encrypted = models.TextField(blank=True)
    # v0.1 configs carry free-form request headers instead (a JSON object, encrypted).
    headers_encrypted = models.TextField(blank=True)
    # The protocol version the config was created in: its deliveries use that payload shape.
    dialect = models.CharField(max_length=8, default="1.0")
    # Which event kinds the config hears (TaskEvent.Kind values).
    event_kinds = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "config_id"], name="push_config_id_per_task")
        ]
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.config_id} -> {self.url}"


class Delivery(models.Model):
    """One event for one config: the outbox row, written in the event's transaction."""

    class State(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        DELIVERED = "delivered"
        DEAD = "dead"  # permanent failure, or out of attempts: waits for an operator

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    config = models.ForeignKey(PushConfig, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey("tasks_app.TaskEvent", on_delete=models.CASCADE, related_name="+")
    seq = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(fields=["config", "event"], name="one_delivery_per_event")
        ]
        indexes = [
            models.Index(fields=["config", "state", "seq"], name="delivery_next_of_config"),
            models.Index(fields=["state", "next_attempt_at"], name="delivery_due"),
        ]

    def __str__(self) -> str:
        return f"{self.config_id} #{self.seq} {self.state}"


class DeliveryAttempt(models.Model):
    """Every POST made for a delivery: when, what came back, how long it took."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempts_log")
    started_at = models.DateTimeField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    outcome = models.CharField(max_length=16)  # delivered | retry | dead

    class Meta:
        ordering = ["started_at", "id"]
