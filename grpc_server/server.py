"""The gRPC sidecar's server: the A2A services, health and reflection, TLS, graceful stop; on
A2A_GRPC_LISTEN for every agent, and with A2A_GRPC_AGENT_PORTS on a port of each agent's own
(grpc_server.agent_ports), the same services bound to that agent.

On SIGTERM the sidecar drains (a2a_platform.drain): health turns NOT_SERVING, the ports close
and new calls are refused (grpcio's `stop(grace)`), and the calls in flight go on for
A2A_DRAIN_SECONDS; then a blocking SendMessage answers with its task as it is, and a server
stream ends with UNAVAILABLE saying to subscribe again (the status gRPC clients retry on), so
that nothing in flight is cancelled when grpcio's grace ends.

An asyncio server (grpc.aio): the A2A operations are coroutines already, and no call waits for
a free pool worker. Their database work runs on the process's bounded pool of database threads
(a2a_platform.db), shared by all calls; docs/benchmarks.md has the measurements behind the choice.
"""

from __future__ import annotations

import asyncio
import functools
import signal
from pathlib import Path

import grpc
import grpc.aio
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.types import a2a_pb2 as pb10
from django.conf import settings
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2

from a2a_platform import drain, heap
from a2a_platform.metrics import start_sidecar_metrics_server
from bindings.grpc import (
    COMPAT_SERVICE,
    COMPAT_SERVICE_DESCRIPTOR,
    V03_SERVICE,
    V10_SERVICE,
    A2AServiceV03,
    A2AServiceV10,
    compat_handlers,
    service_handlers,
)
from grpc_server.agent_ports import AgentPorts

SERVICES = (V10_SERVICE, V03_SERVICE, COMPAT_SERVICE)
# The drain's waits end this long before grpcio's grace, which cancels what still runs: time
# for the last answers to be read and sent.
ANSWER_SECONDS = 1.0
# Where reflection finds a2a.v1.A2AService with all its methods (see reflection_pool).
MERGED_V03_FILE = "a2a_v1_service.proto"


def reflection_pool() -> DescriptorPool:
    """The descriptions reflection serves, in a pool of their own: the SDK's v0.3 file
    declares `a2a.v1.A2AService` with the v0.3 proto's methods only, and the default pool
    cannot hold a second service of that name. Here the v0.3 file comes without its service,
    and a file of ours declares the service with the v0.3 proto's methods (their options
    too) and the other documents' (bindings/protos/service.proto)."""
    pool = DescriptorPool()
    added: set[str] = set()

    def add(file: FileDescriptor) -> None:
        if file.name in added:
            return
        for dependency in file.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        if file.name == pb03.DESCRIPTOR.name:
            del proto.service[:]
        pool.AddSerializedFile(proto.SerializeToString())
        added.add(file.name)

    for file in (
        pb10.DESCRIPTOR,
        COMPAT_SERVICE_DESCRIPTOR.file,
        health_pb2.DESCRIPTOR,
        reflection_pb2.DESCRIPTOR,
    ):
        add(file)
    merged = descriptor_pb2.FileDescriptorProto(
        name=MERGED_V03_FILE,
        package=pb03.DESCRIPTOR.package,
        syntax="proto3",
        dependency=sorted(
            {d.name for d in COMPAT_SERVICE_DESCRIPTOR.file.dependencies}
            | {COMPAT_SERVICE_DESCRIPTOR.file.name}
        ),
    )
    service = merged.service.add()
    pb03.DESCRIPTOR.services_by_name["A2AService"].CopyToProto(service)
    compat = descriptor_pb2.ServiceDescriptorProto()
    COMPAT_SERVICE_DESCRIPTOR.CopyToProto(compat)
    declared = {method.name for method in service.method}
    for method in compat.method:
        if method.name == "CreateTaskPushNotification":
            # Under a2a.v1 the v0.3 documents name it, with the v0.3 proto's request (the
            # table's shape is accepted too).
            method.input_type = ".a2a.v1.CreateTaskPushNotificationConfigRequest"
        if method.name not in declared:
            service.method.add().CopyFrom(method)
    pool.AddSerializedFile(merged.SerializeToString())
    return pool


@functools.cache
def _reflection() -> DescriptorPool:
    return reflection_pool()  # one pool, shared by the main server and the agents' ports


def a2a_server(
    health_servicer: health.aio.HealthServicer, *, bound: tuple[str, str] | None = None
) -> grpc.aio.Server:
    """A server of the A2A services, health and reflection, with no port yet; `bound`: the
    agent whose own port it serves (grpc_server.agent_ports), every call to it that agent's."""
    limit = settings.A2A_GRPC_MAX_MESSAGE_BYTES
    options = [
        ("grpc.max_receive_message_length", limit),
        # Answers are not capped: a task with large artifacts must still be readable.
        ("grpc.max_send_message_length", -1),
        ("grpc.max_concurrent_streams", settings.A2A_GRPC_MAX_CONCURRENT_STREAMS),
        # Idle streams (a subscription to a quiet task) stay open: keep the connection
        # alive through proxies, and let clients ping.
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
    ]
    if bound:
        # An agent's port is its own: never shared without a word with another process that
        # binds it (grpcio's SO_REUSEPORT), whose agent there may be another.
        options.append(("grpc.so_reuseport", 0))
    server = grpc.aio.server(options=options)
    v03 = A2AServiceV03(bound=bound)
    services = {
        V10_SERVICE: service_handlers(
            pb10.DESCRIPTOR.services_by_name["A2AService"], A2AServiceV10(bound=bound)
        ),
        V03_SERVICE: service_handlers(pb03.DESCRIPTOR.services_by_name["A2AService"], v03),
    }
    for service_name, handlers in compat_handlers(v03).items():
        services[service_name] = {**services.get(service_name, {}), **handlers}
    for service_name, handlers in services.items():
        # As grpcio's generated code registers a service: known methods skip the generic lookup.
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service_name, handlers),)
        )
        server.add_registered_method_handlers(service_name, handlers)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*SERVICES, health.SERVICE_NAME, reflection.SERVICE_NAME), server, pool=_reflection()
    )
    return server


def add_port(server: grpc.aio.Server, address: str) -> None:
    """Listen on `address`, with TLS when the sidecar has a certificate (every port alike);
    RuntimeError if the port cannot be bound."""
    if settings.A2A_GRPC_TLS_CERT_FILE:
        credentials = grpc.ssl_server_credentials(
            [
                (
                    Path(settings.A2A_GRPC_TLS_KEY_FILE).read_bytes(),
                    Path(settings.A2A_GRPC_TLS_CERT_FILE).read_bytes(),
                )
            ]
        )
        server.add_secure_port(address, credentials)
    else:
        server.add_insecure_port(address)


def agent_server(
    health_servicer: health.aio.HealthServicer, agent: tuple[str, str], address: str
) -> grpc.aio.Server:
    """An agent's own port (grpc_server.agent_ports): the same services, bound to `agent`."""
    server = a2a_server(health_servicer, bound=agent)
    add_port(server, address)
    return server


def build_server() -> tuple[grpc.aio.Server, health.aio.HealthServicer]:
    """The main server, every agent's, on A2A_GRPC_LISTEN."""
    health_servicer = health.aio.HealthServicer()
    server = a2a_server(health_servicer)
    add_port(server, settings.A2A_GRPC_LISTEN)
    return server, health_servicer


async def serve() -> None:
    """Serve until SIGTERM or SIGINT, then drain in-flight calls within the grace period."""
    server, health_servicer = build_server()
    if settings.A2A_GRPC_METRICS_LISTEN:
        # Its own port: this process's instruments are not those daphne's /metrics shows.
        start_sidecar_metrics_server(settings.A2A_GRPC_METRICS_LISTEN)
        print(f"gRPC sidecar metrics on http://{settings.A2A_GRPC_METRICS_LISTEN}/", flush=True)
    await server.start()
    agent_ports = (
        AgentPorts(functools.partial(agent_server, health_servicer))
        if settings.A2A_GRPC_AGENT_PORTS
        else None
    )
    if agent_ports is not None:
        # The agents' ports open before the sidecar says it serves: `make run`'s summary (and
        # a readiness probe) then means every card's v0.3 address answers.
        await agent_ports.start()
    heap.freeze("gRPC sidecar")
    for name in ("", *SERVICES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    tls = "TLS" if settings.A2A_GRPC_TLS_CERT_FILE else "plaintext"
    print(f"gRPC sidecar listening on {settings.A2A_GRPC_LISTEN} ({tls})", flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    grace = settings.A2A_GRPC_GRACE_SECONDS
    waits = drain_seconds(grace)
    print(
        f"gRPC sidecar stopping: calls in flight get {waits:g} s, then are answered "
        f"(cancelled after {grace:g} s)",
        flush=True,
    )
    await health_servicer.enter_graceful_shutdown()
    drain.begin(waits)
    await asyncio.gather(
        server.stop(grace), *([agent_ports.stop(grace)] if agent_ports is not None else [])
    )


def drain_seconds(grace: float) -> float:
    """How long the calls in flight go on after SIGTERM: A2A_DRAIN_SECONDS, ending at least
    ANSWER_SECONDS (or half of a shorter `grace`) before grpcio's grace does."""
    return max(0.0, min(settings.A2A_DRAIN_SECONDS, grace - min(ANSWER_SECONDS, grace / 2)))
