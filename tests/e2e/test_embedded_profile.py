"""The embedded profile that `make run` starts (SQLite in WAL mode, the filesystem broker, no
Redis) under concurrent load: every task completes, blocking, streaming and canceled alike."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid

import httpx
import pytest

from ..conftest import ROOT, VENV_BIN, _free_port, start_web, stop_process

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    var = tmp_path_factory.mktemp("embedded")
    port = _free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")
    }
    env.update(
        A2A_VAR_DIR=str(var),
        A2A_PUBLIC_BASE_URL=f"http://127.0.0.1:{port}",
        DJANGO_SECRET_KEY="embedded-test",
        PYTHONPATH=str(ROOT),
    )
    manage = [sys.executable, "manage.py"]
    subprocess.run(
        [*manage, "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True
    )
    seeded = subprocess.run(
        [*manage, "seed_demo"], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    ).stdout
    key = seeded.split("API key (demo): ")[1].split()[0]
    web = start_web(port, env, var / "daphne.log")
    worker_log = var / "worker.log"
    worker = subprocess.Popen(
        [str(VENV_BIN / "celery"), "-A", "a2a_platform", "worker", "--concurrency=2"],
        cwd=ROOT,
        env=env,
        stdout=worker_log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        yield f"http://127.0.0.1:{port}/a2a/demo/", key, worker_log
    finally:
        stop_process(worker)
        stop_process(web)


def test_concurrent_sends_all_complete_on_sqlite_and_the_filesystem_broker(embedded):
    base, key, worker_log = embedded

    async def one(http: httpx.AsyncClient, n: int) -> str:
        body = {
            "jsonrpc": "2.0",
            "id": n,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"text": f"n{n}"}],
                }
            },
        }
        answer = (await http.post(base + "echo/", json=body)).json()
        return answer["result"]["task"]["status"]["state"]

    async def scenario():
        headers = {"X-API-Key": key, "A2A-Version": "1.0"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            return await asyncio.gather(*(one(http, n) for n in range(40)))

    states = asyncio.run(scenario())
    assert states == ["TASK_STATE_COMPLETED"] * 40
    assert "Traceback" not in worker_log.read_text()


def test_streaming_without_redis_polls_the_log(embedded):
    base, _, _ = embedded
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {
            "message": {
                "messageId": f"tck-stream-001-{uuid.uuid4()}",
                "role": "ROLE_USER",
                "parts": [{"text": "x"}],
            }
        },
    }
    with httpx.stream(
        "POST", base + "conformance/", json=body, headers={"A2A-Version": "1.0"}, timeout=30
    ) as response:
        lines = list(response.iter_lines())
    data = [line for line in lines if line.startswith("data: ")]
    # Polling may find the task already done: then the opening snapshot is the whole story.
    assert '"TASK_STATE_COMPLETED"' in data[-1]
    assert any("Stream hello from TCK" in line for line in data)
    assert lines[0].startswith("id: ")
