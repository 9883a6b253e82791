"""The production profile's web tier as `make run` starts it (manage.py runweb): several daphne
processes on one port, each with a listening socket of its own, blocking sends and streams on
connections that land on any of them; a port already taken and a multi-process tier without a
shared channel layer are refused with a message saying why; SIGTERM stops every process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ..conftest import ROOT, _free_port, _wait_for_port, stop_process
from .helpers import raw_send

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def runweb(env: dict[str, str], port: int, log: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "runweb", "--port", str(port), *args],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def listening_sockets(pid: int, port: int) -> int:
    """How many sockets listening on `port` process `pid` holds (from /proc/net/tcp)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and int(fields[1].rpartition(":")[2], 16) == port:  # LISTEN
            inodes.add(fields[9])
    held = {os.readlink(fd).removeprefix("socket:[").rstrip("]") for fd in _fds(pid)}
    return len(inodes & held)


def _fds(pid: int) -> list[Path]:
    return [fd for fd in Path(f"/proc/{pid}/fd").iterdir() if fd.is_symlink()]


def test_runweb_serves_one_port_from_several_daphne_processes(
    live_platform, make_tenant, make_agent, make_key, tmp_path
):
    assert live_platform.env.get("REDIS_URL") or os.environ.get("REDIS_URL")
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    key = make_key(tenant)
    port = _free_port()
    web = runweb(live_platform.env, port, tmp_path / "web.log", "--processes", "2")
    try:
        _wait_for_port(port, web, tmp_path / "web.log")
        # The first daphne may listen before runweb has started the second: wait for both.
        deadline = time.monotonic() + 15
        while len(daphnes := children(web.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(daphnes) == 2, (tmp_path / "web.log").read_text()
        for pid in daphnes:
            assert b"--fd" in Path(f"/proc/{pid}/cmdline").read_bytes()
            assert listening_sockets(pid, port) == 1
        assert listening_sockets(web.pid, port) == 0  # handed over, not kept

        # Blocking sends and streams on twenty fresh connections, which the kernel spreads
        # over both processes; the worker's events reach whichever process waits.
        url = f"http://127.0.0.1:{port}/a2a/{tenant.slug}/{agent.slug}/"
        headers = {"X-API-Key": key, "A2A-Version": "1.0"}

        async def one(n: int) -> tuple[str, str]:
            async with httpx.AsyncClient(headers=headers, timeout=30) as http:
                sent = (await http.post(url, json=raw_send(f"hi {n}"))).json()
                body = raw_send(f"stream {n}") | {"method": "SendStreamingMessage"}
                async with http.stream("POST", url, json=body) as stream:
                    last = [line async for line in stream.aiter_lines() if line.startswith("data:")]
            return sent["result"]["task"]["status"]["state"], last[-1]

        async def all_of_them() -> list[tuple[str, str]]:
            return await asyncio.wait_for(asyncio.gather(*map(one, range(20))), 120)

        results = asyncio.run(all_of_them())
        assert {state for state, _ in results} == {"TASK_STATE_COMPLETED"}
        assert all("TASK_STATE_COMPLETED" in last for _, last in results)

        # The port is taken now: a second web tier says so and starts nothing.
        second = runweb(live_platform.env, port, tmp_path / "second.log")
        assert second.wait(60) != 0
        said = (tmp_path / "second.log").read_text()
        assert f"Port {port} on 127.0.0.1 is already in use" in said, said
        assert "Traceback" not in said

        web.send_signal(signal.SIGTERM)
        assert web.wait(60) == 0
        for pid in daphnes:
            assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid)
    finally:
        stop_process(web)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return "gone"


def test_several_processes_need_a_shared_channel_layer(live_platform, tmp_path):
    env = {k: v for k, v in live_platform.env.items() if k != "REDIS_URL"}
    # Asked for on the command line, and in the environment (both started at once: each is a
    # process of its own).
    web = runweb(env, _free_port(), tmp_path / "web.log", "--processes", "2")
    from_env = runweb({**env, "A2A_WEB_PROCESSES": "3"}, _free_port(), tmp_path / "env.log")
    try:
        assert web.wait(60) != 0
        said = (tmp_path / "web.log").read_text()
        assert "--processes 2 needs a shared channel layer (REDIS_URL)" in said, said
        assert "Traceback" not in said
        # In the environment, it is refused the same way, not quietly made one.
        assert from_env.wait(60) != 0
        said = (tmp_path / "env.log").read_text()
        assert "A2A_WEB_PROCESSES=3 needs a shared channel layer (REDIS_URL)" in said, said
    finally:
        stop_process(web)
        stop_process(from_env)
