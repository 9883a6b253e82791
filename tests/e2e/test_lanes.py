"""Run lanes and the limits they count, end to end: the a2a-sdk's client on every binding and
both current versions, against daphne, the gRPC sidecar and a real agents worker.

No timings are asserted: how many runs were running at once is read from the runs' own start
and end records in each task's event log, and every wait is bounded only so that a broken lane
fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from a2a.types import TaskState

from agents.models import Plan
from tasks_app.models import TERMINAL_STATES, Task, TaskEvent

from .clients import GRPC, HTTP_JSON, JSONRPC, V0_3, V1_0, sdk_client, send, user_message
from .helpers import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RECORDER = "tests.agents.sample_executors.SleepRecorder"


def peak_running(task_ids: list[str]) -> int:
    """The most runs running at one moment, swept from each run's start and end as the
    SleepRecorder wrote them into its task's artifact event."""
    edges = []
    for event in TaskEvent.objects.filter(task_id__in=task_ids, kind=TaskEvent.Kind.ARTIFACT):
        record = json.loads(event.data["artifactUpdate"]["artifact"]["parts"][0]["text"])
        edges += [(record["start"], 1), (record["end"], -1)]
    assert len(edges) == 2 * len(task_ids), "every run recorded its start and end"
    running = peak = 0
    for _, step in sorted(edges):  # an end before a start at the same instant
        running += step
        peak = max(peak, running)
    return peak


@pytest.mark.parametrize(("binding", "version"), [(JSONRPC, V1_0), (HTTP_JSON, V0_3), (GRPC, V1_0)])
def test_a_tenant_at_its_running_cap_never_runs_more_and_another_tenants_run_starts_at_once(
    live_platform, make_tenant, make_agent, make_key, settings, binding, version
):
    settings.A2A_PYTHON_EXECUTORS = [RECORDER]
    noisy = make_tenant()
    noisy.plan = Plan.objects.create(name=f"capped-{uuid.uuid4().hex[:8]}", running_runs=2)
    noisy.save()
    sleeper = make_agent(
        noisy, "sleeper", kind="python", config={"class_path": RECORDER, "init_kwargs": {}}
    )
    quiet = make_tenant()
    echo = make_agent(quiet, "echo")
    noisy_key, quiet_key = make_key(noisy), make_key(quiet)

    async def scenario() -> tuple[list[str], list[str]]:
        async with sdk_client(
            live_platform.agent_url(sleeper), key=noisy_key, binding=binding, version=version
        ) as client:
            sent = [
                await send(client, user_message(f"run {n}", f"m-{n}"), return_immediately=True)
                for n in range(6)
            ]
        task_ids = [response.task.id for response in sent]
        async with sdk_client(
            live_platform.agent_url(echo), key=quiet_key, binding=binding, version=version
        ) as client:
            answer = await send(client, user_message("hello", "q-1"))
        assert answer.task.status.state == TaskState.TASK_STATE_COMPLETED
        # The quiet tenant's run went while the noisy one's waited in its lane.
        waiting = await asyncio.to_thread(
            lambda: list(
                Task.objects.filter(pk__in=task_ids)
                .exclude(state__in=TERMINAL_STATES)
                .values_list("pk", flat=True)
            )
        )
        return task_ids, waiting

    task_ids, waiting = asyncio.run(scenario())
    assert waiting, "the quiet tenant's run waited for the noisy tenant's backlog"
    wait_until(
        lambda: Task.objects.filter(pk__in=task_ids, state__in=TERMINAL_STATES).count() == 6,
        timeout=90,
        what="the noisy tenant's six runs to end",
    )
    assert set(Task.objects.filter(pk__in=task_ids).values_list("state", flat=True)) == {
        "TASK_STATE_COMPLETED"
    }
    assert peak_running(task_ids) == 2


@pytest.mark.parametrize(("binding", "version"), [(JSONRPC, V0_3), (HTTP_JSON, V1_0), (GRPC, V0_3)])
def test_a_send_past_a_quota_is_refused_in_the_bindings_format_and_writes_nothing(
    live_platform, make_tenant, make_agent, make_key, binding, version
):
    tenant = make_tenant()
    tenant.limits = {"stored_tasks": 1}
    tenant.save()
    agent = make_agent(tenant, "echo")
    key = make_key(tenant)

    async def scenario() -> Exception:
        async with sdk_client(
            live_platform.agent_url(agent), key=key, binding=binding, version=version
        ) as client:
            await send(client, user_message("first", "m-1"))
            with pytest.raises(Exception) as refused:
                await send(client, user_message("second", "m-2"))
            return refused.value

    refused = str(asyncio.run(scenario()))
    # The SDK's client keeps the HTTP status (429) of JSON-RPC and REST refusals, and the
    # status of gRPC's; test_rate_limits reads the details the refusals carry.
    said = {JSONRPC: "429", HTTP_JSON: "HTTP Error 429", GRPC: "RESOURCE_EXHAUSTED"}
    assert said[binding] in refused, refused
    assert Task.objects.filter(tenant=tenant).count() == 1
