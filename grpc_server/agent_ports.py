"""The sidecar's own port for each agent (A2A_GRPC_AGENT_PORTS): the v0.3 address its card
gives, where every call is that agent's.

A v0.3 gRPC request carries no `tenant`, and grpcio shows Python servers no `:authority`
(grpc/grpc#38906), so without a front that copies the authority (deploy/haproxy-grpc.cfg) a
call to the one shared port cannot say which agent it is for. A port per agent can: agent N is
at the range's first port + N - 1 (agents.cards.grpc_agent_port), worked out alike by the web
for the card and here, with nothing to agree on.

Which agents have a port is read from the database every POLL_SECONDS: an agent created later
gets its port within that time, and a deleted or deactivated one loses it (its calls in flight
get the same grace as at shutdown). A port another program holds is said once and tried again
at each read, never fatal; the other agents' ports and the main port serve on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import grpc.aio
from django.conf import settings

from a2a_platform.db import db
from a2a_platform.startup import port_in_use, split_address
from agents.cards import grpc_agent_port
from agents.models import Agent

POLL_SECONDS = 2.0

AgentPath = tuple[str, str]  # (tenant slug, agent slug)


def agents_with_ports() -> dict[int, AgentPath]:
    """Port -> agent, for every active agent (of an active tenant) inside the range."""
    assert settings.A2A_GRPC_AGENT_PORTS is not None
    first, last = settings.A2A_GRPC_AGENT_PORTS
    rows = Agent.objects.filter(
        is_active=True, tenant__is_active=True, pk__lte=last - first + 1
    ).values_list("pk", "tenant__slug", "slug")
    return {
        port: (tenant, slug)
        for pk, tenant, slug in rows
        if (port := grpc_agent_port(pk)) is not None
    }


def _name(agent: AgentPath) -> str:
    return "/".join(agent)


class AgentPorts:
    """The agents' ports this sidecar serves, kept in step with the database.

    `open_port(agent, address)`: a server of the A2A services bound to `agent`, not started
    yet, listening on `address` (RuntimeError when the port cannot be bound)."""

    def __init__(self, open_port: Callable[[AgentPath, str], grpc.aio.Server]) -> None:
        self.open_port = open_port
        self.host = settings.A2A_GRPC_LISTEN.rpartition(":")[0]  # brackets kept for IPv6
        self.serving: dict[int, tuple[AgentPath, grpc.aio.Server]] = {}
        self.held: set[int] = set()  # ports another program holds, said once
        self.closing: set[asyncio.Task[None]] = set()
        self.grace = settings.A2A_GRPC_GRACE_SECONDS
        self.stopping = asyncio.Event()
        self.watching: asyncio.Task[None] | None = None

    async def sync(self) -> None:
        """Open the ports of agents that have none yet, close those of agents gone."""
        wanted = await db(agents_with_ports)()
        for port, (agent, server) in list(self.serving.items()):
            if wanted.get(port) != agent:
                del self.serving[port]
                self._close(server)
                print(
                    f"gRPC sidecar: {self._address(port)} closed ({_name(agent)} is gone)",
                    flush=True,
                )
        opened = []
        for port, agent in sorted(wanted.items()):
            if port not in self.serving and await self._open(port, agent):
                opened.append(f"{_name(agent)} on {self._address(port)}")
        if opened:
            print(f"gRPC sidecar: v0.3 ports of {', '.join(opened)}", flush=True)

    async def _open(self, port: int, agent: AgentPath) -> bool:
        address = self._address(port)
        try:
            # Asked first, so that a held port costs no server each time it is tried again.
            if port_in_use(*split_address(address)):
                raise RuntimeError("in use")
            server = self.open_port(agent, address)
        except (OSError, RuntimeError) as exc:
            if port not in self.held:
                self.held.add(port)
                print(
                    f"gRPC sidecar: port {port} cannot be bound ({exc}): {_name(agent)} has no "
                    "port of its own until it can (its other addresses serve on)",
                    flush=True,
                )
            return False
        await server.start()
        self.serving[port] = (agent, server)
        self.held.discard(port)
        return True

    def _address(self, port: int) -> str:
        return f"{self.host}:{port}"

    def _close(self, server: grpc.aio.Server) -> None:
        task = asyncio.create_task(server.stop(self.grace))
        self.closing.add(task)
        task.add_done_callback(self.closing.discard)

    async def start(self) -> None:
        """Open the ports of the agents there are now, then keep them in step."""
        await self.refresh()
        self.watching = asyncio.create_task(self._watch())

    async def refresh(self) -> None:
        """sync(), a failed read (the database away) leaving the ports as they are until the
        next."""
        try:
            await self.sync()
        except Exception as exc:  # the next read tries again; the ports serve on
            print(f"gRPC sidecar: the agents' ports were not updated: {exc}", flush=True)

    async def _watch(self) -> None:
        while not self.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), POLL_SECONDS)
            if not self.stopping.is_set():
                await self.refresh()

    async def stop(self, grace: float) -> None:
        """Stop every agent's port as the main one stops: in-flight calls get `grace`."""
        self.stopping.set()
        if self.watching is not None:
            await self.watching  # a read under way ends first: no port opens after this
        await asyncio.gather(
            *(server.stop(grace) for _, server in self.serving.values()), *self.closing
        )
