"""Tasks and what belongs to them. JSON columns hold v1.0 proto-JSON; queried fields are columns."""

from __future__ import annotations

import uuid

from a2a.types import TaskState
from django.db import models

TERMINAL_STATES = frozenset(
    TaskState.Name(s)
    for s in (
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    )
)
INTERRUPTED_STATES = frozenset(
    TaskState.Name(s)
    for s in (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED)
)
# A task whose run is queued or in flight: a worker may still write to it.
RUNNING_STATES = frozenset(
    TaskState.Name(s) for s in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
)
# A run in flight: its job is handed to the broker (not held in its lane), or a worker runs it.
IN_FLIGHT = models.Q(running_since__isnull=False) | (~models.Q(job_id="") & models.Q(held=False))
MAX_ID_LENGTH = 200  # messageId and contextId columns
STATE_CHOICES = [(name, name) for name in TaskState.keys() if name != "TASK_STATE_UNSPECIFIED"]


class Task(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No single-column indexes on the keys: the composite indexes below start with them.
    tenant = models.ForeignKey(
        "agents.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    agent = models.ForeignKey(
        "agents.Agent", on_delete=models.CASCADE, related_name="tasks", db_index=False
    )
    context_id = models.CharField(max_length=200)
    owner = models.CharField(max_length=220)
    state = models.CharField(max_length=32, choices=STATE_CHOICES)
    status_message = models.JSONField(null=True, blank=True)
    status_timestamp = models.DateTimeField()
    metadata = models.JSONField(default=dict, blank=True)
    # The last TaskEvent sequence number; the next event takes last_seq + 1.
    last_seq = models.PositiveIntegerField(default=0)
    # messageId of an agent Message that answered the request directly (no task semantics).
    reply_message_id = models.CharField(max_length=200, blank=True)
    cancel_requested = models.BooleanField(default=False)
    # Set (in the same transaction) when a push config is stored for the task, never cleared:
    # an event of a task without it looks for no configs to deliver to.
    has_push_configs = models.BooleanField(default=False, db_default=False)
    # How the request that created the task spoke: its protocol version (a2a_platform.versions)
    # and its spelling (Caller.spelling: REST v0.3's wire spelling, v0.1's hex task id). A later
    # call that does not say which version it speaks (JSON-RPC without A2A-Version) is answered
    # as the task's creator was. "" on tasks created before these were recorded, and by calls
    # that set none.
    dialect = models.CharField(max_length=8, blank=True, default="", db_default="")
    spelling = models.CharField(max_length=16, blank=True, default="", db_default="")
    # Set while a worker runs the executor; the worker renews the lease while alive.
    running_since = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Which worker process runs it (tasks_app.runtime): that worker renews the leases of all
    # its runs in one UPDATE.
    runner = models.CharField(max_length=120, blank=True)
    # The queued run's Celery id; cleared when a worker claims it, so a redelivered copy of the
    # same job finds nothing to do.
    job_id = models.CharField(max_length=64, blank=True)
    # The queued run's arguments and when it was queued, so a job the broker lost is queued
    # again (by the reaper) instead of leaving the task submitted forever.
    job_args = models.JSONField(null=True, blank=True)
    job_queued_at = models.DateTimeField(null=True, blank=True)
    # The queued run waits in its tenant's lane (tasks_app.lanes): its job is not handed to
    # the broker yet. `job_queued_at` is then when it joined the lane (its place in it).
    held = models.BooleanField(default=False, db_default=False)
    # Which run of the current turn this is: 1, then one more each time the reaper starts the
    # run again after its worker died (Agent.worker_loss "retry"); a new turn starts at 1.
    attempt = models.PositiveSmallIntegerField(default=1, db_default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # ListTasks: one index per filter combination, each in the keyset order, so a page is
        # an index range read from the cursor on (docs/decisions.md, "Listing tasks at scale").
        indexes = [
            models.Index(
                fields=["agent", "owner", "-status_timestamp", "-id"], name="task_list_by_owner"
            ),
            models.Index(fields=["agent", "-status_timestamp", "-id"], name="task_list_by_agent"),
            models.Index(
                fields=["agent", "owner", "state", "-status_timestamp", "-id"],
                name="task_list_by_owner_state",
            ),
            models.Index(
                fields=["agent", "state", "-status_timestamp", "-id"], name="task_list_by_state"
            ),
            # A context is one conversation: an owner's list of it filters this index's range.
            models.Index(
                fields=["agent", "context_id", "-status_timestamp", "-id"],
                name="task_list_by_context",
            ),
            # The console's task list, across a tenant's agents (and for operators, all).
            models.Index(fields=["tenant", "-status_timestamp", "-id"], name="task_list_by_tenant"),
            # The console's charts: tasks created in a time range.
            models.Index(fields=["tenant", "created_at"], name="task_created_by_tenant"),
            models.Index(
                fields=["lease_expires_at"],
                name="task_lease",
                condition=models.Q(running_since__isnull=False),
            ),
            models.Index(
                fields=["runner"],
                name="task_runner",
                condition=models.Q(running_since__isnull=False),
            ),
            models.Index(
                fields=["job_queued_at"],
                name="task_queued_job",
                condition=~models.Q(job_id=""),
            ),
            # The lanes (tasks_app.lanes): a tenant's runs in flight, counted up to its window,
            # and the runs waiting in its lane, oldest first.
            models.Index(fields=["tenant", "agent"], name="task_in_flight", condition=IN_FLIGHT),
            models.Index(
                fields=["tenant", "job_queued_at"], name="task_held", condition=models.Q(held=True)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.state})"

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES


# Counts of one (agent, owner, state) are spread over this many rows, so concurrent changes
# of one owner's tasks seldom wait for each other's row lock.
TASK_COUNT_SHARDS = 8


class TaskCount(models.Model):
    """How many of an agent's tasks an owner has in a state: ListTasks' totalSize without
    counting tasks. The services change it in the transaction that creates a task or changes
    its state (`services._task_counts_move`). Only the sum over the shards means anything:
    a shard is chosen by task id, but counts that existed before counting began all sit in
    shard 0, so one shard may be negative."""

    agent = models.ForeignKey(
        "agents.Agent", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    owner = models.CharField(max_length=220)
    state = models.CharField(max_length=32, choices=STATE_CHOICES)
    shard = models.PositiveSmallIntegerField()
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            # The upsert's conflict target; its index also serves the sums (agent, owner,
            # state prefixes) and the cascade from the agent.
            models.UniqueConstraint(
                fields=["agent", "owner", "state", "shard"], name="task_count_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.owner} {self.state} [{self.shard}]: {self.n}"


class SentMessage(models.Model):
    """A message a caller sent to an agent, by its messageId: a SendMessage that repeats the
    id with the same request (a client retrying after a lost answer) gets what the first one
    made, not a second task or run; one that reuses the id for another request is refused.
    Written in the send's own transaction; kept `A2A_MESSAGE_ID_RETENTION_SECONDS`."""

    agent = models.ForeignKey(
        "agents.Agent", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    owner = models.CharField(max_length=220)
    message_id = models.CharField(max_length=MAX_ID_LENGTH)
    # The first request's digest (tasks_app.services.send_fingerprint), read only when its id
    # is sent again. "" (rows written by a process of an earlier version, which sets no value)
    # matches any request.
    fingerprint = models.CharField(max_length=64, default="", db_default="")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="+")
    # The task's event sequence when the message was sent, as the first send's waiters saw it.
    since_seq = models.PositiveIntegerField()
    # Whether the message made the task (not a follow-up to an interrupted one).
    created_task = models.BooleanField()
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            # Its index also serves the cascade from the agent.
            models.UniqueConstraint(
                fields=["agent", "owner", "message_id"], name="sent_message_key"
            )
        ]
        indexes = [models.Index(fields=["created_at"], name="sent_message_age")]

    def __str__(self) -> str:
        return f"{self.message_id} -> {self.task_id}"


class LaneSender(models.Model):
    """When a tenant last sent a message, as the processes that serve sends tell one another:
    a tenant's window (tasks_app.lanes) applies only while another tenant has sent lately,
    and a client that keeps its connection to one web process is seen by that one only. Each
    process writes the senders it saw and reads the others at most once a second
    (`lanes.Contention`); one row per tenant that ever sent."""

    # No foreign key constraint: written in a savepoint of whichever send shares the view,
    # whose commit must not fail over a tenant deleted meanwhile (its row is then harmless).
    tenant = models.OneToOneField(
        "agents.Tenant",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="+",
        db_constraint=False,
    )
    sent_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["-sent_at"], name="lane_sender_recent")]

    def __str__(self) -> str:
        return f"{self.tenant_id} sent at {self.sent_at}"


class Message(models.Model):
    """One message of a task's history, in order."""

    # No index of its own on `task`: the unique constraint below starts with it.
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    position = models.PositiveIntegerField()
    message_id = models.CharField(max_length=200)
    role = models.CharField(max_length=20)
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["task", "position"], name="message_position_unique")
        ]


class Artifact(models.Model):
    # No index of its own on `task`: the unique constraint below starts with it.
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="artifacts", db_index=False
    )
    artifact_id = models.CharField(max_length=200)
    position = models.PositiveIntegerField()
    data = models.JSONField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["task", "artifact_id"], name="artifact_id_unique")
        ]


class TaskEvent(models.Model):
    """The append-only event log of a task: one StreamResponse (v1.0 JSON) per row."""

    class Kind(models.TextChoices):
        TASK = "task"
        STATUS = "status_update"
        ARTIFACT = "artifact_update"
        MESSAGE = "message"

    # No index of its own on `task`: the unique constraint below starts with it.
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=20, choices=Kind.choices)
    # The task's state once this event was applied: streams and waiters end on it.
    state = models.CharField(max_length=32, choices=STATE_CHOICES, default="")
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["seq"]
        constraints = [
            models.UniqueConstraint(fields=["task", "seq"], name="task_event_seq_unique")
        ]


class ExecutorState(models.Model):
    """What an agent's executor keeps between the runs of a task: an `a2a-proxy`'s upstream
    task and context ids, a `webhook` run's callback token digest. The platform's own: no
    binding shows it (a client could otherwise point a proxy at another upstream task).
    Written by `services.executor_state_save`, read by the run (`selectors.executor_state`)."""

    task = models.OneToOneField(
        Task, on_delete=models.CASCADE, primary_key=True, related_name="executor_state"
    )
    data = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"state of {self.task_id}"
