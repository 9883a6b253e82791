"""ListTasks at scale: totalSize for every filter combination in both scopes (owner and
tenant-admin), keyset pages through timestamp ties, and on PostgreSQL an index in the keyset
order for every filter."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from a2a.types import (
    ListTasksRequest,
    TaskState,
)
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from google.protobuf.timestamp_pb2 import Timestamp

from agents.auth import Principal
from tasks_app import selectors
from tasks_app.models import Task
from tasks_app.selectors import task_list
from tests.conftest import require
from tests.factories import task_create, task_send

ALICE = Principal(owner="key:alice")
BOB = Principal(owner="key:bob")
ADMIN = Principal(owner="key:root", is_tenant_admin=True)
BASE = timezone.now().replace(microsecond=0) - timedelta(days=1)


def timestamp(value):
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts


def list_all(agent, principal, **fields):
    """Every page of the listing: the ids in order, and the totalSize each page reported."""
    ids, totals, token = [], set(), ""
    while True:
        page = task_list(
            agent=agent,
            principal=principal,
            request=ListTasksRequest(page_size=3, page_token=token, **fields),
        )
        ids += [t.id for t in page.tasks]
        totals.add(page.total_size)
        token = page.next_page_token
        if not token:
            return ids, totals


@pytest.fixture
def listed(make_tenant, make_agent):
    """An agent with tasks of two owners in several states and contexts (one context id used
    by both owners), their status timestamps a minute apart in pairs (ties)."""
    agent = make_agent(make_tenant(), "lister")
    make_agent(agent.tenant, "other")  # an agent whose tasks must never count
    states = [
        TaskState.TASK_STATE_SUBMITTED,
        TaskState.TASK_STATE_WORKING,
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
    ]
    plan = [(ALICE, "c1"), (ALICE, "c2"), (BOB, "c1"), (ALICE, "c1"), (BOB, "c3")] * 3
    for i, (principal, context_id) in enumerate(plan):
        state = states[i % len(states)]
        task_id = task_create(agent, state=state, principal=principal, context_id=context_id).pk
        Task.objects.filter(pk=task_id).update(status_timestamp=BASE + timedelta(minutes=i // 2))
    task_send(make_agent(make_tenant(), "elsewhere"), principal=ALICE, context_id="c1")
    return agent


def expected(agent, principal, state, context_id, after):
    tasks = Task.objects.filter(agent=agent)
    if not principal.is_tenant_admin:
        tasks = tasks.filter(owner=principal.owner)
    if state:
        tasks = tasks.filter(state=TaskState.Name(state))
    if context_id:
        tasks = tasks.filter(context_id=context_id)
    rows = [
        (t.status_timestamp, t.pk) for t in tasks if after is None or t.status_timestamp > after
    ]
    return [str(pk) for _, pk in sorted(rows, reverse=True)]


STATES = [
    TaskState.TASK_STATE_UNSPECIFIED,
    TaskState.TASK_STATE_SUBMITTED,
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,  # no task has it
]
AFTERS = [None, BASE - timedelta(minutes=1), BASE + timedelta(minutes=3), BASE + timedelta(hours=1)]


def test_total_size_and_pages_are_exact_for_every_filter_and_scope(listed, monkeypatch):
    for principal, state, context_id, after in itertools.product(
        [ALICE, BOB, ADMIN], STATES, ["", "c1", "nowhere"], AFTERS
    ):
        fields = {"status": state, "context_id": context_id}
        if after is not None:
            fields["status_timestamp_after"] = timestamp(after)
        want = expected(listed, principal, state, context_id, after)
        case = (principal.owner, TaskState.Name(state), context_id, after)
        # when every page is listed, then each task comes once, in order, and every page
        # reports them all
        assert list_all(listed, principal, **fields) == (want, {len(want)}), case
        if after is None:
            continue
        # a timestamp filter is counted on the side of it that is small, or both ways
        for limit in (0, 1, 4, 10):
            monkeypatch.setattr(selectors, "TOTAL_SIZE_COUNT_LIMIT", limit)
            page = task_list(agent=listed, principal=principal, request=ListTasksRequest(**fields))
            assert page.total_size == len(want), (*case, limit)
        monkeypatch.undo()


def test_pages_split_ties_on_the_status_timestamp_by_id(listed):
    Task.objects.filter(agent=listed).update(status_timestamp=BASE)
    ids, totals = list_all(listed, ADMIN)
    assert ids == expected(listed, ADMIN, None, "", None) and totals == {15}


def test_total_size_comes_from_the_counts_in_the_callers_scope(listed):
    # given the tasks, then totalSize is read from the counts, and no query counts tasks
    for principal, fields, want in (
        (ALICE, {}, 9),
        (BOB, {}, 6),
        (ADMIN, {}, 15),
        (ALICE, {"status": TaskState.TASK_STATE_COMPLETED}, 2),
        (ADMIN, {"status": TaskState.TASK_STATE_COMPLETED}, 4),
    ):
        with CaptureQueriesContext(connection) as captured:
            page = task_list(agent=listed, principal=principal, request=ListTasksRequest(**fields))
        assert page.total_size == want
        reads = " ".join(q["sql"].upper() for q in captured.captured_queries)
        assert "TASKS_APP_TASKCOUNT" in reads and "COUNT(" not in reads


# --- the query plans (PostgreSQL) ------------------------------------------------------------

SEED = """
INSERT INTO tasks_app_task (id, tenant_id, agent_id, context_id, owner, state,
    status_timestamp, metadata, last_seq, reply_message_id, cancel_requested, runner, job_id,
    created_at, updated_at)
SELECT gen_random_uuid(), %(tenant)s, %(agent)s, 'ctx-' || (i / 4), 'key:o' || (i / 4 %% 10),
    (ARRAY['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING', 'TASK_STATE_COMPLETED',
           'TASK_STATE_FAILED', 'TASK_STATE_CANCELED'])[i %% 5 + 1],
    now() - i * interval '1 second', '{}', 1, '', false, '', '', now(), now()
FROM generate_series(1, 4000) AS i
"""
OWNER = Principal(owner="key:o3")
RECENT = timezone.now() - timedelta(seconds=100)
PLAN_CASES = {
    "owner": (OWNER, {}, "task_list_by_owner"),
    "admin": (ADMIN, {}, "task_list_by_agent"),
    "owner, state": (OWNER, {"status": TaskState.TASK_STATE_WORKING}, "task_list_by_owner_state"),
    "admin, state": (ADMIN, {"status": TaskState.TASK_STATE_WORKING}, "task_list_by_state"),
    "owner, context": (OWNER, {"context_id": "ctx-103"}, "task_list_by_context"),
    "admin, context": (ADMIN, {"context_id": "ctx-103"}, "task_list_by_context"),
    "owner, context, state": (
        OWNER,
        {"context_id": "ctx-103", "status": TaskState.TASK_STATE_FAILED},
        "task_list_by_context",
    ),
    "owner, updated after": (
        OWNER,
        {"status_timestamp_after": timestamp(RECENT)},
        "task_list_by_owner",
    ),
    "admin, state, updated after": (
        ADMIN,
        {"status": TaskState.TASK_STATE_COMPLETED, "status_timestamp_after": timestamp(RECENT)},
        "task_list_by_state",
    ),
    "owner, next page": (OWNER, {"page_token": "next"}, "task_list_by_owner"),
}


def _plan_nodes(node):
    yield node
    for child in node.get("Plans", []):
        yield from _plan_nodes(child)


@pytest.mark.parametrize("case", PLAN_CASES)
def test_every_filter_reads_an_index_in_the_keyset_order(case, make_tenant, make_agent):
    require(connection.vendor == "postgresql", "query plans are checked on PostgreSQL")
    # given a few thousand tasks, and a planner told to avoid scanning the table or sorting
    # wherever it can (on a table this small it might prefer either)
    agent = make_agent(make_tenant(), "planned")
    with connection.cursor() as cursor:
        cursor.execute(SEED, {"tenant": agent.tenant_id, "agent": agent.pk})
        cursor.execute("ANALYZE tasks_app_task")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
    principal, fields, index = PLAN_CASES[case]
    if fields.get("page_token") == "next":
        first = task_list(agent=agent, principal=principal, request=ListTasksRequest())
        fields = {"page_token": first.next_page_token}

    # when
    with CaptureQueriesContext(connection) as captured:
        task_list(agent=agent, principal=principal, request=ListTasksRequest(**fields))

    # then every read of the tasks is an index's, nothing is sorted, and the page is read in
    # the order of the index made for the filter
    reads = [q["sql"] for q in captured.captured_queries if '"tasks_app_task"' in q["sql"]]
    assert reads
    for sql in reads:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
            nodes = list(_plan_nodes(cursor.fetchone()[0][0]["Plan"]))
        kinds = {n["Node Type"] for n in nodes}
        assert not kinds & {"Sort", "Incremental Sort"}, sql
        task_scans = [n for n in nodes if n.get("Relation Name") == "tasks_app_task"]
        assert task_scans and all(n["Node Type"] != "Seq Scan" for n in task_scans), sql
        if "ORDER BY" in sql:
            assert [n["Index Name"] for n in task_scans] == [index]
