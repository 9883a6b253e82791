"""The issue's acceptance path: the demo agents that `make run` creates (`seed_demo`), called with
the official a2a-sdk client in v1.0 and v0.3: send, get, list, cancel and multi-turn; and the
demo's keys, which stay the same from one start to the next while they are valid."""

from __future__ import annotations

import asyncio
import io
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    TaskNotCancelableError,
    TaskState,
)
from django.core.management import call_command
from django.utils import timezone

from agents.auth import key_prefix
from agents.models import ApiKey

from ..conftest import ROOT
from .clients import V0_3, V1_0, sdk_client, send, user_message
from .helpers import raw_send, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo(live_platform, capsys, settings):
    call_command("seed_demo", "--tenant", f"demo-{uuid.uuid4().hex[:8]}")
    out = capsys.readouterr().out
    key = out.split("API key (")[1].split(": ")[1].split()[0]
    cards = [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("agent card")]
    echo, conformance = (card.removesuffix(".well-known/agent-card.json") for card in cards)
    return (
        key,
        echo.replace("http://127.0.0.1:8000", live_platform.url),
        conformance.replace("http://127.0.0.1:8000", live_platform.url),
    )


@pytest.mark.parametrize("version", [V1_0, V0_3])
def test_demo_agents_with_the_sdk_client(demo, version):
    key, echo_url, conformance_url = demo

    async def scenario():
        async with sdk_client(echo_url, key=key, version=version) as echo:
            task = (await send(echo, user_message("hello demo", f"m-{uuid.uuid4()}"))).task
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            got = await echo.get_task(GetTaskRequest(id=task.id, history_length=1))
            assert got.artifacts[0].parts[0].text == "hello demo" and len(got.history) == 1
            with pytest.raises(TaskNotCancelableError):
                await echo.cancel_task(CancelTaskRequest(id=task.id))
            if version == V1_0:
                listed = await echo.list_tasks(ListTasksRequest(page_size=10))
                assert [t.id for t in listed.tasks] == [task.id]
        async with sdk_client(conformance_url, version=version) as conformance:  # anonymous
            asked = (
                await send(conformance, user_message("?", f"tck-input-required-{uuid.uuid4()}"))
            ).task
            assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            done = (
                await send(
                    conformance,
                    user_message(
                        "here", f"m-{uuid.uuid4()}", task_id=asked.id, context_id=asked.context_id
                    ),
                )
            ).task
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            slow = (
                await send(
                    conformance, user_message("slow", f"m-{uuid.uuid4()}"), return_immediately=True
                )
            ).task
            canceled = await conformance.cancel_task(CancelTaskRequest(id=slow.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        if version == V0_3:  # the SDK's v0.3 client has no list_tasks: speak tasks/list directly
            body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/list", "params": {"pageSize": 1}}
            async with httpx.AsyncClient(headers={"X-API-Key": key}) as http:
                page = (await http.post(echo_url, json=body)).json()["result"]
            assert page["totalSize"] == 1 and page["tasks"][0]["kind"] == "task"
            assert page["tasks"][0]["status"]["state"] == "completed"

    asyncio.run(scenario())


# --- the demo's keys across starts --------------------------------------------------------------


def _seed_demo(live_platform, var: Path, tenant: str, *args: str) -> list[str]:
    """`manage.py seed_demo` as `make run` runs it on the live platform's database: the var
    dir's key file is the key in use (make run exports it as DJANGO_SECRET_KEY_FILE when no
    key is set). Its lines."""
    env = {k: v for k, v in live_platform.env.items() if k != "DJANGO_SECRET_KEY"}
    env.update(A2A_VAR_DIR=str(var), DJANGO_SECRET_KEY_FILE=str(var / "secret_key"))
    done = subprocess.run(
        [sys.executable, "manage.py", "seed_demo", "--tenant", tenant, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def _demo_key(lines: list[str], tenant: str) -> str:
    [line] = [line for line in lines if line.startswith(f"API key ({tenant}): ")]
    return line.split(": ", 1)[1]


def _ask(url: str, key: str) -> tuple[int, str]:
    """A blocking SendMessage to `url` with `key`: the HTTP status and the task's state."""
    body = raw_send("hi")
    headers = {"X-API-Key": key, "A2A-Version": "1.0"}
    answer = httpx.post(url, json=body, headers=headers, timeout=60)
    if answer.status_code != 200:
        return answer.status_code, ""
    return 200, answer.json()["result"]["task"]["status"]["state"]


def _seed_demo_here(tenant: str, *args: str) -> list[str]:
    """`manage.py seed_demo` in this process (with this process's settings): its lines."""
    out = io.StringIO()
    call_command("seed_demo", "--tenant", tenant, *args, stdout=out)
    return out.getvalue().splitlines()


def test_the_demo_keys_stay_the_same_while_they_are_valid(live_platform, tmp_path, settings):
    # given a var dir whose key is the platform's, as make run leaves it
    var = tmp_path / "var"
    var.mkdir()
    (var / "secret_key").write_text(settings.SECRET_KEY + "\n")
    (var / "secret_key").chmod(0o600)
    tenant = f"demo-{uuid.uuid4().hex[:8]}"
    echo = f"{live_platform.url}/a2a/{tenant}/echo/"
    proxy = f"{live_platform.url}/a2a/{tenant}/echo-proxy/"

    # when seed_demo runs twice, as two starts of make run run it
    first = _demo_key(_seed_demo(live_platform, var, tenant), tenant)
    proxy_key = ApiKey.objects.get(tenant__slug=tenant, name="echo-proxy")
    second = _demo_key(_seed_demo(live_platform, var, tenant), tenant)
    # then the same key is printed, kept in the var dir, mode 0600 (its directory 0700)
    assert first.startswith("a2a_") and second == first
    kept = var / "demo_api_keys" / tenant
    assert kept.read_text().strip() == first
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    # and echo-proxy's own key for echo is the same row, still the only one
    live = ApiKey.objects.filter(tenant__slug=tenant, revoked_at__isnull=True)
    assert sorted(live.values_list("name", flat=True)) == ["demo", "echo-proxy"]
    assert live.get(name="echo-proxy").pk == proxy_key.pk
    # and both still work: the demo key calls echo, and echo-proxy reaches echo with its own
    assert _ask(echo, first) == (200, "TASK_STATE_COMPLETED")
    assert _ask(proxy, first) == (200, "TASK_STATE_COMPLETED")

    # The same var dir from here on, seed_demo in this process (a start costs seconds).
    settings.VAR_DIR = var
    # when the kept secret no longer matches the key (tampered with)
    kept.write_text(first[:-4] + "AAAA\n")
    third = _demo_key(_seed_demo_here(tenant), tenant)
    # then a new key is issued and kept, and the old one no longer works
    assert third not in (first, first[:-4] + "AAAA")
    assert kept.read_text().strip() == third
    assert _ask(echo, third) == (200, "TASK_STATE_COMPLETED")
    wait_until(lambda: _ask(echo, first)[0] == 401, what="the replaced key to be refused")

    # when both keys were revoked meanwhile (in the console or the admin)
    ApiKey.objects.filter(prefix=key_prefix(third)).update(revoked_at=timezone.now())
    ApiKey.objects.filter(pk=proxy_key.pk).update(revoked_at=timezone.now())
    fourth = _demo_key(_seed_demo_here(tenant), tenant)
    # then each is replaced, and the demo and its proxy work again
    assert fourth not in (first, third) and kept.read_text().strip() == fourth
    renewed = ApiKey.objects.get(tenant__slug=tenant, name="echo-proxy", revoked_at__isnull=True)
    assert renewed.pk != proxy_key.pk
    assert _ask(echo, fourth) == (200, "TASK_STATE_COMPLETED")
    assert _ask(proxy, fourth) == (200, "TASK_STATE_COMPLETED")

    # and --new-key replaces a valid demo key on purpose
    fifth = _demo_key(_seed_demo_here(tenant, "--new-key"), tenant)
    assert fifth != fourth and kept.read_text().strip() == fifth


def test_without_the_var_dirs_key_the_demo_key_is_kept_but_not_stored(
    live_platform, tmp_path, settings
):
    """A production profile (its key its own, as this process's; the var dir perhaps a
    container's): no secret is written to disk; the key stays, later runs print its prefix."""
    settings.VAR_DIR = tmp_path / "var"  # holds no key: the one in use is the environment's
    tenant = f"demo-{uuid.uuid4().hex[:8]}"

    first = _demo_key(_seed_demo_here(tenant), tenant)
    again = _demo_key(_seed_demo_here(tenant), tenant)
    prefix = key_prefix(first)
    assert again.startswith(f"a2a_{prefix}_... (kept; issued ")
    assert again.endswith("`manage.py seed_demo --new-key` replaces it)")
    assert not (tmp_path / "var").exists()
    assert _ask(f"{live_platform.url}/a2a/{tenant}/echo/", first) == (200, "TASK_STATE_COMPLETED")
    renewed = _demo_key(_seed_demo_here(tenant, "--new-key"), tenant)
    assert key_prefix(renewed) != prefix and renewed.startswith("a2a_")
    live = ApiKey.objects.get(tenant__slug=tenant, name="demo", revoked_at__isnull=True)
    assert live.prefix == key_prefix(renewed)
