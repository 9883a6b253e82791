"""manage.py runweb [--bind H] [--port P] [--processes N]: the web tier, N daphne processes
listening on one port, each on a SO_REUSEPORT socket of its own handed over with daphne's
`--fd`. `make run` and the benchmark start the web tier with this command, so there is one
place that says how.

One daphne process serves HTTP on one core; the production profile runs one per core
(`A2A_WEB_PROCESSES`), the kernel spreading new connections over them. Every request may land
on any process: tasks, events and the doorbell live in PostgreSQL and Redis. The embedded
profile's in-memory channel layer cannot cross processes, so there it is one process.

This command binds the port (one already taken is said plainly, before any daphne starts),
starts the processes (daphne as a2a_platform.webserver configures it), passes SIGTERM and
SIGINT on to them once, and exits when any of them exits, stopping the others, with that
process's exit status. On SIGTERM each daphne drains (a2a_platform.drain): it takes no new
connection, answers what is in flight within A2A_DRAIN_SECONDS, and exits.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from a2a_platform.startup import port_in_use
from agents.crypto import encryption_keys_check
from tasks_app.doorbell import shared_layer

# How long the processes get to finish their requests after SIGTERM before SIGKILL, at least:
# their drain (A2A_DRAIN_SECONDS, then a few seconds to answer and close) fits well within.
STOP_GRACE_SECONDS = 30


def listen(bind: str, port: int, count: int) -> list[socket.socket]:
    """`count` sockets listening on bind:port, one per process. With SO_REUSEPORT the kernel
    spreads new connections over them evenly; one socket shared by all would give most of them
    to whichever process happens to wake first. A port that another program holds is found by
    binding once without SO_REUSEPORT first."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    try:
        taken = port_in_use(bind, port)
        sockets = [
            socket.create_server((bind, port), family=family, backlog=1024, reuse_port=count > 1)
            for _ in range(0 if taken else count)
        ]
    except OSError as exc:
        raise CommandError(f"Cannot listen on {bind}:{port}: {exc.strerror}") from exc
    if taken:
        raise CommandError(
            f"Port {port} on {bind} is already in use: stop what listens there, or choose "
            "another port (PORT=8001 make run)."
        )
    for sock in sockets:
        sock.set_inheritable(True)
    return sockets


class Command(BaseCommand):
    help = (
        "Serve HTTP with N daphne processes on one port (--processes, default "
        "A2A_WEB_PROCESSES: one per core with Redis, else 1)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bind", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--processes", type=int, default=None)
        parser.add_argument(
            "daphne_args", nargs="*", help="passed on to daphne, after --, e.g. -- --verbosity 0"
        )

    def handle(self, *args: Any, bind: str, port: int, processes: int | None, **options: Any):
        count = settings.A2A_WEB_PROCESSES if processes is None else processes
        if count < 1:
            raise CommandError(f"--processes must be at least 1, not {count}")
        if count > 1 and shared_layer() is None:
            asked = (
                f"--processes {count}" if processes is not None else f"A2A_WEB_PROCESSES={count}"
            )
            raise CommandError(
                f"{asked} needs a shared channel layer (REDIS_URL): the in-memory one cannot "
                "wake a waiter in another process"
            )
        encryption_keys_check()
        daphne_args = options["daphne_args"]
        if not settings.A2A_ACCESS_LOG and not {"--access-log", "-v", "--verbosity"} & {
            arg.partition("=")[0] for arg in daphne_args
        }:
            daphne_args = ["--verbosity", "0", *daphne_args]  # daphne logs access from 1 up
        children = []
        for sock in listen(bind, port, count):
            argv = [sys.executable, "-m", "a2a_platform.webserver", "--fd", str(sock.fileno())]
            argv += [*daphne_args, "a2a_platform.asgi:application"]
            children.append(subprocess.Popen(argv, pass_fds=[sock.fileno()]))
            sock.close()  # the child holds it
        self.stdout.write(f"web: {count} daphne process(es) on http://{bind}:{port}/")

        signalled: set[int] = set()

        def stop(signum: int, _frame: Any) -> None:
            """Pass the signal on, once to each process: a second one would not hurry a
            drain, only be logged as a stop of a reactor already stopping."""
            for child in children:
                if child.poll() is None and child.pid not in signalled:
                    signalled.add(child.pid)
                    child.send_signal(signum)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        status = 0
        try:
            pid, wait_status = os.wait()  # the first process to end ends the web tier
            status = os.waitstatus_to_exitcode(wait_status)
            for child in children:
                if child.pid == pid:
                    child.returncode = status
        finally:
            stop(signal.SIGTERM, None)
            grace = max(STOP_GRACE_SECONDS, settings.A2A_DRAIN_SECONDS + 10)
            for child in children:
                try:
                    child.wait(grace)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
        if status:
            sys.exit(status if status > 0 else 128 - status)
