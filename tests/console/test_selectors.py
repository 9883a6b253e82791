"""console.selectors on real PostgreSQL: scopes per user, the task pages (ListTasks' own page
token), state counts, the overview, keys, deliveries and the numbers behind the charts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from a2a.types import TaskState
from a2a.utils.task import decode_list_tasks_cursor
from django.http import Http404
from django.utils import timezone

from agents.models import Membership
from agents.services import api_key_create
from console import charts
from console.selectors import (
    agent_get_by_path_or_404,
    agent_scope,
    api_key_list,
    chart_data_get,
    delivery_page_get,
    membership_role,
    overview_get,
    task_detail_get,
    task_event_rows,
    task_get_or_404,
    task_page_get,
    task_scope,
    task_state_counts,
    tenant_scope,
    tenants_owned,
)
from tasks_app.errors import InvalidParamsError
from tasks_app.models import Task
from tests.factories import task_create, task_status_record


def at(task: Task, *, status: datetime, created: datetime | None = None) -> None:
    """Put the task's last status change (and its creation) at the given moments."""
    fields = {"status_timestamp": status}
    if created is not None:
        fields["created_at"] = created
    Task.objects.filter(pk=task.pk).update(**fields)


# --- scopes ------------------------------------------------------------------------------------


def test_scopes_follow_memberships_and_staff_sees_everything(world, django_user_model):
    task_a, task_b = task_create(world["agent_a"]), task_create(world["agent_b"])
    both = {world["a"].pk, world["b"].pk}

    assert set(tenant_scope(user=world["member_a"]).values_list("pk", flat=True)) == {world["a"].pk}
    assert list(agent_scope(user=world["member_b"])) == [world["agent_b"]]
    assert list(task_scope(user=world["member_a"])) == [task_a]
    assert set(tenant_scope(user=world["operator"]).values_list("pk", flat=True)) >= both
    assert {task_a, task_b} <= set(task_scope(user=world["operator"]))

    # a disabled account sees nothing, and a closed tenant is closed to its people
    world["member_b"].is_active = False
    assert not tenant_scope(user=world["member_b"]).exists()
    world["a"].is_active = False
    world["a"].save(update_fields=["is_active"])
    assert not tenant_scope(user=world["member_a"]).exists()
    assert tenant_scope(user=world["operator"]).filter(pk=world["a"].pk).exists()


def test_lookups_answer_404_for_another_tenant_as_for_nothing(world):
    task_b = task_create(world["agent_b"])
    path_b = f"{world['b'].slug}/beta"

    assert agent_get_by_path_or_404(user=world["member_b"], path=path_b) == world["agent_b"]
    for path in (path_b, f"{world['b'].slug}/nothing", "no-slash", "UPPER/case", "a/b/c"):
        with pytest.raises(Http404):
            agent_get_by_path_or_404(user=world["member_a"], path=path)
    for task_id in (str(task_b.pk), "not-a-uuid"):
        with pytest.raises(Http404):
            task_get_or_404(user=world["member_a"], tenant_slug=world["b"].slug, task_id=task_id)
    found = task_get_or_404(
        user=world["member_b"], tenant_slug=world["b"].slug, task_id=str(task_b.pk)
    )
    assert found == task_b


def test_roles_and_owned_tenants(world):
    a, b = world["a"], world["b"]
    assert membership_role(user=world["owner_a"], tenant=a) == Membership.Role.OWNER
    assert membership_role(user=world["member_a"], tenant=a) == Membership.Role.MEMBER
    assert membership_role(user=world["member_a"], tenant=b) == ""
    assert membership_role(user=world["operator"], tenant=b) == "operator"
    assert tenants_owned(user=world["owner_a"], tenants=[a, b]) == [a]
    assert tenants_owned(user=world["member_a"], tenants=[a, b]) == []


# --- tasks -------------------------------------------------------------------------------------


def test_task_pages_walk_every_task_once_with_the_list_tasks_page_token(world):
    tasks = [task_create(world["agent_a"], context_id="paged") for _ in range(7)]
    task_create(world["agent_b"], context_id="paged")  # another tenant's: on no page
    base = datetime(2024, 6, 1, tzinfo=UTC)
    for n, task in enumerate(tasks):
        at(task, status=base + timedelta(seconds=n // 3))  # ties, broken by the id
    expected = list(
        Task.objects.filter(pk__in=[t.pk for t in tasks])
        .order_by("-status_timestamp", "-id")
        .values_list("pk", flat=True)
    )

    seen, after = [], ""
    while True:
        page = task_page_get(user=world["member_a"], context_id="paged", after=after, size=3)
        seen.append([t.pk for t in page["tasks"]])
        if not page["next_after"]:
            break
        # the token is ListTasks' own: it names the last task of the page
        cursor = decode_list_tasks_cursor(page["next_after"])
        assert cursor is not None and cursor.task_id == str(page["tasks"][-1].pk)
        after = page["next_after"]

    assert [len(p) for p in seen] == [3, 3, 1]
    assert [pk for p in seen for pk in p] == expected


def test_task_pages_filter_and_refuse_a_token_this_server_did_not_issue(world):
    done = task_create(world["agent_a"], state=TaskState.TASK_STATE_COMPLETED)
    task_create(world["agent_a"], state=TaskState.TASK_STATE_WORKING)
    old = task_create(world["agent_a"], state=TaskState.TASK_STATE_COMPLETED)
    at(old, status=datetime(2020, 1, 1, tzinfo=UTC))

    page = task_page_get(user=world["owner_a"], state="TASK_STATE_COMPLETED", size=10)
    assert [t.pk for t in page["tasks"]] == [done.pk, old.pk] and page["next_after"] == ""
    since = datetime(2021, 1, 1, tzinfo=UTC)
    page = task_page_get(user=world["owner_a"], state="TASK_STATE_COMPLETED", since=since, size=10)
    assert [t.pk for t in page["tasks"]] == [done.pk]
    page = task_page_get(user=world["owner_a"], until=since, size=10)
    assert [t.pk for t in page["tasks"]] == [old.pk]
    assert task_page_get(user=world["member_b"], agent=world["agent_a"], size=10)["tasks"] == []

    for token in ("not-a-cursor!", "eyJ0cyI6IDEsICJpZCI6ICJub3BlIn0", "e30"):
        with pytest.raises(InvalidParamsError):
            task_page_get(user=world["owner_a"], after=token, size=10)


def test_state_counts_are_per_user_and_agent(world, make_agent):
    other = make_agent(world["a"], "other")
    for state in (TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_COMPLETED):
        task_create(world["agent_a"], state=state)
    task_create(other, state=TaskState.TASK_STATE_FAILED)
    task_create(world["agent_b"], state=TaskState.TASK_STATE_CANCELED)

    assert task_state_counts(user=world["member_a"]) == [
        ("TASK_STATE_COMPLETED", 2),
        ("TASK_STATE_FAILED", 1),
    ]
    assert task_state_counts(user=world["member_a"], agent=other) == [("TASK_STATE_FAILED", 1)]
    assert task_state_counts(user=world["member_b"]) == [("TASK_STATE_CANCELED", 1)]


def test_a_tasks_detail_and_its_event_rows(world):
    task = task_create(world["agent_a"], state=TaskState.TASK_STATE_COMPLETED, reply="done")
    seqs = list(task.events.order_by("seq").values_list("seq", flat=True))
    assert len(seqs) >= 2

    detail = task_detail_get(task=task, events_shown=1)
    assert [e.seq for e in detail["events"]] == seqs[-1:]  # the newest only
    assert [m.role for m in detail["messages"]][:1] == ["ROLE_USER"]
    assert detail["artifacts"] == []
    assert [e.seq for e in task_detail_get(task=task, events_shown=100)["events"]] == seqs

    rows = task_event_rows(task_id=task.pk, from_seq=seqs[1])
    assert [row[0] for row in rows] == seqs[1:]
    seq, kind, state, created_at, data = rows[-1]
    assert (
        state == "TASK_STATE_COMPLETED" and isinstance(data, dict) and created_at <= timezone.now()
    )
    assert task_event_rows(task_id=task.pk, from_seq=seqs[0], limit=1)[0][0] == seqs[0]


# --- the overview and keys ---------------------------------------------------------------------


def test_the_overview_counts_each_agents_tasks_by_state(world, make_agent):
    idle = make_agent(world["a"], "idle")
    task_create(world["agent_a"])
    task_create(world["agent_a"], state=TaskState.TASK_STATE_COMPLETED)
    task_create(world["agent_b"])

    seen = overview_get(user=world["owner_a"])
    assert seen["tenants"] == [world["a"]] and seen["managed_tenants"] == [world["a"]]
    by_slug = {agent.slug: agent for agent in seen["agents"]}
    assert set(by_slug) == {"alpha", idle.slug}
    assert by_slug["alpha"].state_counts == [
        ("TASK_STATE_COMPLETED", 1),
        ("TASK_STATE_SUBMITTED", 1),
    ]
    assert by_slug["alpha"].n == 2
    assert by_slug[idle.slug].state_counts == [] and by_slug[idle.slug].n == 0
    assert overview_get(user=world["member_a"])["managed_tenants"] == []
    operator = overview_get(user=world["operator"])
    assert operator["managed_tenants"] == operator["tenants"]


def test_an_agents_keys_are_the_tenants_and_its_own_active_ones(world, make_agent):
    other = make_agent(world["a"], "other")
    tenant_wide = api_key_create(tenant=world["a"], name="tenant-wide")[0]
    own = api_key_create(tenant=world["a"], name="own", agent=world["agent_a"])[0]
    api_key_create(tenant=world["a"], name="others", agent=other)
    revoked = api_key_create(tenant=world["a"], name="revoked")[0]
    revoked.revoked_at = timezone.now()
    revoked.save(update_fields=["revoked_at"])
    api_key_create(tenant=world["b"], name="tenant-b")

    assert api_key_list(agent=world["agent_a"]) == [own, tenant_wide]  # newest first


# --- deliveries --------------------------------------------------------------------------------


def test_delivery_pages_count_every_state_and_filter_by_agent_and_state(world, settings):
    settings.A2A_PUSH_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    for agent in (world["agent_a"], world["agent_a"], world["agent_b"]):
        task = task_create(agent, push_url="http://127.0.0.1:9/hook")
        task_status_record(task.pk, TaskState.TASK_STATE_WORKING)  # a delivery in the outbox

    found = delivery_page_get(
        user=world["member_a"], agent=None, state="", page_number=None, per_page=1
    )
    assert found["total"] == 2
    assert dict(found["counts"]) == {"pending": 2, "sending": 0, "delivered": 0, "dead": 0}
    assert len(found["page"].object_list) == 1 and found["page"].paginator.num_pages == 2
    assert isinstance(found["page"].object_list, list)  # read in the selector, not the template

    dead = delivery_page_get(
        user=world["member_a"], agent=world["agent_a"], state="dead", page_number=1, per_page=10
    )
    assert dead["total"] == 2 and dead["page"].object_list == []
    theirs = delivery_page_get(
        user=world["member_b"], agent=world["agent_a"], state="", page_number=1, per_page=10
    )
    assert theirs["total"] == 0


# --- charts ------------------------------------------------------------------------------------


def test_chart_data_counts_per_bucket_for_the_busiest_agents(world, make_agent):
    quiet = make_agent(world["a"], "quiet")
    now = timezone.now()
    buckets = charts.buckets_for("24h", now)
    start = buckets.start + buckets.size * 2  # the third bucket
    for seconds, state in ((30, "COMPLETED"), (90, "FAILED"), (60, "COMPLETED")):
        task = task_create(world["agent_a"], state=getattr(TaskState, f"TASK_STATE_{state}"))
        at(task, created=start, status=start + timedelta(seconds=seconds))
    at(task_create(quiet), created=start, status=start)
    task_create(world["agent_b"])

    data = chart_data_get(
        user=world["member_a"],
        agent=None,
        buckets=buckets,
        max_agents=1,
        max_duration_rows=1000,
        min_durations_per_bucket=1,
    )
    assert data.agents == [world["agent_a"]] and data.more  # the busiest; "quiet" left out
    stats = data.stats[world["agent_a"].pk]
    assert stats["created"][2] == 3 and sum(stats["created"]) == 3
    assert stats["finished"][2] == 3 and stats["errors"][2] == 1
    assert sorted(stats["durations"][2]) == [30.0, 60.0, 90.0]

    # one agent asked for; durations sampled down to the smallest share
    data = chart_data_get(
        user=world["member_a"],
        agent=quiet,
        buckets=buckets,
        max_agents=12,
        max_duration_rows=0,
        min_durations_per_bucket=2,
    )
    assert data.agents == [quiet] and not data.more
    assert data.stats[quiet.pk]["created"][2] == 1 and data.stats[quiet.pk]["finished"][2] == 0
    sampled = chart_data_get(
        user=world["member_a"],
        agent=world["agent_a"],
        buckets=buckets,
        max_agents=12,
        max_duration_rows=0,
        min_durations_per_bucket=2,
    )
    assert len(sampled.stats[world["agent_a"].pk]["durations"][2]) == 2
