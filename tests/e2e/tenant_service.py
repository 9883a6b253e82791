"""The tenant's own service behind a `webhook` agent, for the end-to-end tests: the documented
example (examples/webhook_receiver.py) run as it is, in a process of its own, so that CI keeps
the example working."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import ROOT, _free_port, stop_process

EXAMPLE = ROOT / "examples" / "webhook_receiver.py"


@dataclass
class ExampleService:
    """examples/webhook_receiver.py on a port of its own; its log (one line per request it
    answered or refused, and per callback it posted) in `directory`."""

    directory: Path
    jwks: str
    token: str = ""
    port: int = field(default_factory=_free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/a2a-hook"

    @property
    def log(self) -> Path:
        return self.directory / f"example-{self.port}.log"

    def start(self, timeout: float = 10) -> ExampleService:
        self.directory.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, str(EXAMPLE), "--port", str(self.port), "--jwks", self.jwks]
        # `--token=...` in one word: a random token may start with "-", which argparse would
        # take for an option of its own.
        command += ["--step-delay", "0.02"] + ([f"--token={self.token}"] if self.token else [])
        self.proc = subprocess.Popen(command, stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the example service exited:\n{self.log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the example service did not open {self.port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""
