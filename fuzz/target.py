"""The platform under test, and what the fuzzer learned from it before fuzzing: real task ids
of each dialect, a context id and a push config, so that mutated requests reach past "task not
found" into the operations themselves."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

LOOPBACK = "127.0.0.1"


class NotLoopback(ValueError):
    """The fuzzer sends only to 127.0.0.1."""


def loopback_address(value: str, what: str) -> tuple[str, int]:
    """(host, port) of `http://127.0.0.1:PORT` or `127.0.0.1:PORT`; anything else refused."""
    parts = urlsplit(value if "//" in value else f"//{value}")
    if parts.scheme not in ("", "http") or parts.hostname != LOOPBACK or not parts.port:
        raise NotLoopback(f"{what} must be {LOOPBACK} with a port, not {value!r}")
    return LOOPBACK, parts.port


@dataclass
class Target:
    host: str
    port: int
    grpc_address: str
    key: str
    tenant: str
    agent: str
    # Learned at set-up (fuzz.run.learn): task ids by the dialect that created them.
    tasks: dict[str, list[str]] = field(default_factory=dict)
    context_ids: list[str] = field(default_factory=list)
    config_id: str = "fuzz-config"
    config_task: str = ""
    page_token: str = ""  # a real ListTasks page token

    @property
    def root(self) -> str:
        """The agent's URL path: JSON-RPC here, REST v1.0 under it, v0.3 under its v1/."""
        return f"/a2a/{self.tenant}/{self.agent}/"

    @property
    def agent_path(self) -> str:
        """`<tenant>/<agent>`: a v1.0 request's `tenant`, v0.3 gRPC's `a2a-agent`."""
        return f"{self.tenant}/{self.agent}"

    def all_tasks(self) -> list[str]:
        return [task for ids in self.tasks.values() for task in ids]
