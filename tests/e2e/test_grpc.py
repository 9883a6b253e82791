"""The gRPC sidecar (`manage.py rungrpc`) end to end: real daphne, Celery worker and sidecar
processes, called with the generated stubs as any gRPC client (or grpcurl) would.

What it serves (reflection, health), how a call finds its agent (the v1.0 request's `tenant`,
v0.3 `a2a-agent` metadata, the task, the default agent), who may see what, the errors on the
wire (status code plus a `google.rpc.Status` ErrorInfo, never UNKNOWN), one task seen through
JSON-RPC and gRPC alike, draining on SIGTERM, and TLS.
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc as pb03_grpc
from a2a.types import a2a_pb2 as pb10
from a2a.types import a2a_pb2_grpc as pb10_grpc
from a2a.utils.errors import A2A_ERROR_MAPPING, A2A_REASON_TO_ERROR, VersionNotSupportedError
from google.protobuf import descriptor_pb2, empty_pb2
from google.protobuf.json_format import MessageToDict, ParseDict
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from bindings.errors import MESSAGE_BYTES
from tasks_app.models import Task

from ..conftest import _free_port, require, start_grpc, stop_process
from .helpers import Target, raw_send, result_of, rpc, rpc_stream

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

V10_SERVICE = "lf.a2a.v1.A2AService"
V03_SERVICE = "a2a.v1.A2AService"
HEALTH_SERVICE = "grpc.health.v1.Health"
DOMAIN = "a2a-protocol.org"
TIMEOUT = 30  # seconds per call: a hung call fails the test instead of hanging it

COMPLETED = pb10.TaskState.TASK_STATE_COMPLETED
INPUT_REQUIRED = pb10.TaskState.TASK_STATE_INPUT_REQUIRED
V03_COMPLETED = pb03.TaskState.TASK_STATE_COMPLETED


# --- helpers ----------------------------------------------------------------------------------


class Deployed(Target):
    """An agent on the platform: its JSON-RPC URL, a key of its tenant, its gRPC tenant value."""

    @property
    def path(self) -> str:
        return self.tenant_value  # <tenant-slug>/<agent-slug>


@dataclass(frozen=True)
class Failure:
    code: grpc.StatusCode
    message: str
    reason: str


def md(
    key: str | None = None, *, agent: str | None = None, version: str | None = None
) -> list[tuple[str, str]]:
    metadata = []
    if key:
        metadata.append(("x-api-key", key))
    if agent:
        metadata.append(("a2a-agent", agent))
    if version:
        metadata.append(("a2a-version", version))
    return metadata


def failure_of(error: grpc.RpcError) -> Failure:
    """The call's status; it must carry a google.rpc.Status with one A2A ErrorInfo."""
    assert isinstance(error, grpc.Call), error
    code = error.code()
    assert code != grpc.StatusCode.UNKNOWN, f"UNKNOWN: {error.details()!r}"
    status = rpc_status.from_call(error)
    assert status is not None, f"{code.name} without grpc-status-details-bin: {error.details()!r}"
    assert status.code == code.value[0] and status.message == error.details(), status
    infos = []
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            infos.append(info)
    assert len(infos) == 1 and infos[0].domain == DOMAIN, status
    reason = infos[0].reason
    cls = A2A_REASON_TO_ERROR.get(reason)
    if cls is not None:  # an A2A error: the code is the one the spec maps its reason to
        expected = (
            "UNIMPLEMENTED"
            if cls is VersionNotSupportedError
            else A2A_ERROR_MAPPING[cls].grpc_status
        )
        assert code.name == expected, (code, status)
    return Failure(code, status.message, reason)


def fails(call: Callable[[], Any]) -> Failure:
    """Run a unary call (or drain a stream) that must fail; its status."""
    try:
        result = call()
        if isinstance(result, Iterator):
            list(result)
    except grpc.RpcError as error:
        return failure_of(error)
    pytest.fail(f"the call succeeded: {result!r}")


def expect(call: Callable[[], Any], code: str, reason: str) -> str:
    """The call fails with this status code and ErrorInfo reason; its message."""
    failure = fails(call)
    assert (failure.code.name, failure.reason) == (code, reason), failure
    return failure.message


def message10(text: str, **fields: Any) -> pb10.Message:
    return pb10.Message(
        message_id=str(uuid.uuid4()),
        role=pb10.Role.ROLE_USER,
        parts=[pb10.Part(text=text)],
        **fields,
    )


def message03(text: str, **fields: Any) -> pb03.Message:
    return pb03.Message(
        message_id=str(uuid.uuid4()),
        role=pb03.Role.ROLE_USER,
        content=[pb03.Part(text=text)],
        **fields,
    )


def send10(
    stub: Any,
    text: str,
    *,
    tenant: str = "",
    metadata: list[tuple[str, str]] | None = None,
    return_immediately: bool = False,
    **fields: Any,
) -> pb10.Task:
    request = pb10.SendMessageRequest(tenant=tenant, message=message10(text, **fields))
    request.configuration.return_immediately = return_immediately
    response = stub.SendMessage(request, metadata=metadata or [], timeout=TIMEOUT)
    assert response.HasField("task"), response
    return response.task


def send03(stub: Any, text: str, *, metadata: list[tuple[str, str]], **fields: Any) -> pb03.Task:
    request = pb03.SendMessageRequest(request=message03(text, **fields))
    response = stub.SendMessage(request, metadata=metadata, timeout=TIMEOUT)
    assert response.HasField("task"), response
    return response.task


def agent_of(task_id: str) -> str:
    task = Task.objects.select_related("agent__tenant").get(pk=task_id)
    return f"{task.agent.tenant.slug}/{task.agent.slug}"


def texts(artifacts: Any) -> list[str]:
    return [part.text for artifact in artifacts for part in artifact.parts]


def payload(response: pb10.StreamResponse) -> str:
    return str(response.WhichOneof("payload"))


def state_of(response: pb10.StreamResponse) -> int:
    if response.HasField("task"):
        return response.task.status.state
    return response.status_update.status.state


def jsonrpc_events(
    http: httpx.Client, target: Deployed, method: str, params: dict[str, Any]
) -> list[pb10.StreamResponse]:
    """A v1.0 JSON-RPC streaming call's events (raw SSE), as protos."""
    events = []
    for answer in rpc_stream(http, target, method, params):
        assert "error" not in answer, answer
        events.append(ParseDict(answer["result"], pb10.StreamResponse()))
    return events


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def channel(live_platform: Any) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(live_platform.grpc_address) as ch:
        yield ch


@pytest.fixture
def v10(channel: grpc.Channel) -> Any:
    return pb10_grpc.A2AServiceStub(channel)


@pytest.fixture
def v03(channel: grpc.Channel) -> Any:
    return pb03_grpc.A2AServiceStub(channel)


@pytest.fixture
def deploy(live_platform, make_tenant, make_agent, make_key) -> Callable[..., Deployed]:
    """An echo agent (configured as given) in a new tenant, or in `tenant`'s."""

    def make(
        slug: str = "echo", tenant: Any = None, *, push_notifications: bool = True, **config: Any
    ) -> Deployed:
        tenant = tenant or make_tenant()
        agent = make_agent(tenant, slug, config=config, push_notifications=push_notifications)
        return Deployed(
            url=live_platform.agent_url(agent),
            key=make_key(tenant, f"alice-{slug}"),
            agent=agent,
        )

    return make


@pytest.fixture
def sidecar(live_platform: Any, tmp_path: Path) -> Iterator[Callable[..., tuple[Any, str]]]:
    """Start another sidecar on a free port with extra env; (process, address). Stopped after
    the test, if still running."""
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str, **env: str) -> tuple[subprocess.Popen[bytes], str]:
        address = f"127.0.0.1:{_free_port()}"
        proc = start_grpc(address, {**live_platform.env, **env}, tmp_path / f"{name}.log")
        started.append(proc)
        return proc, address

    yield start
    for proc in started:
        stop_process(proc)


# --- (a) reflection, (b) health -----------------------------------------------------------------


def test_reflection_lists_both_a2a_services_and_health(channel):
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    requests = [
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=V10_SERVICE),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=V03_SERVICE),
    ]
    listed, *described = list(stub.ServerReflectionInfo(iter(requests), timeout=TIMEOUT))
    names = {s.name for s in listed.list_services_response.service}
    assert {V10_SERVICE, V03_SERVICE, HEALTH_SERVICE} <= names, names
    # As `grpcurl describe` would: each service's file, with its methods.
    for response, service, method in zip(
        described, (V10_SERVICE, V03_SERVICE), ("SubscribeToTask", "TaskSubscription"), strict=True
    ):
        files = [
            descriptor_pb2.FileDescriptorProto.FromString(raw)
            for raw in response.file_descriptor_response.file_descriptor_proto
        ]
        services = {
            f"{f.package}.{s.name}": {m.name for m in s.method} for f in files for s in f.service
        }
        assert service in services, services
        assert {"SendMessage", "GetTask", "CancelTask", method} <= services[service]


def test_health_serving_for_the_server_and_both_services(channel):
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", V10_SERVICE, V03_SERVICE):
        answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING, service
    with pytest.raises(grpc.RpcError) as caught:
        health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=TIMEOUT)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


# --- (c) routing ----------------------------------------------------------------------------------


def test_routing_by_tenant_metadata_and_task(v10, v03, deploy):
    echo = deploy("echo", input_required=True)
    second = deploy("second", tenant=echo.agent.tenant)
    key = echo.key  # a key of the tenant: valid for both agents

    # v1.0: the request's tenant names the agent.
    first = send10(v10, "hi", tenant=echo.path, metadata=md(key))
    assert first.status.state == INPUT_REQUIRED and agent_of(first.id) == echo.path
    other = send10(v10, "hi", tenant=second.path, metadata=md(key))
    assert other.status.state == COMPLETED and agent_of(other.id) == second.path
    # The same value in tenant and a2a-agent is fine too.
    both = send10(v10, "hi", tenant=second.path, metadata=md(key, agent=second.path))
    assert agent_of(both.id) == second.path

    # v0.3: a2a-agent metadata names it; Bearer credentials work as x-api-key does.
    bearer = [("authorization", f"Bearer {key}"), ("a2a-agent", second.path)]
    task03 = send03(v03, "hi", metadata=bearer)
    assert task03.status.state == V03_COMPLETED and agent_of(task03.id) == second.path

    # No agent named, on an existing task: the task's agent serves the call.
    got = v10.GetTask(pb10.GetTaskRequest(id=other.id), metadata=md(key), timeout=TIMEOUT)
    assert got.id == other.id and texts(got.artifacts) == ["hi"]
    got03 = v03.GetTask(pb03.GetTaskRequest(name=f"tasks/{first.id}"), metadata=md(key))
    assert got03.id == first.id
    expect(
        lambda: v10.CancelTask(pb10.CancelTaskRequest(id=other.id), metadata=md(key)),
        "FAILED_PRECONDITION",
        "TASK_NOT_CANCELABLE",
    )
    # A v0.3 follow-up message on the task goes to the task's agent.
    follow03 = send03(v03, "more", metadata=md(key), task_id=first.id, context_id=first.context_id)
    assert follow03.id == first.id and follow03.status.state == V03_COMPLETED

    # ... and so does a v1.0 follow-up that names no tenant.
    again = send10(v10, "one", tenant=echo.path, metadata=md(key))
    assert again.status.state == INPUT_REQUIRED
    follow10 = send10(v10, "two", metadata=md(key), task_id=again.id, context_id=again.context_id)
    assert follow10.id == again.id and follow10.status.state == COMPLETED
    assert texts(follow10.artifacts) == ["one\ntwo"]


def test_routing_to_the_default_agent(deploy, sidecar):
    echo = deploy("echo")
    second = deploy("second", tenant=echo.agent.tenant)
    _, address = sidecar("default-agent", A2A_GRPC_DEFAULT_AGENT=echo.path)
    with grpc.insecure_channel(address) as channel:
        v10, v03 = pb10_grpc.A2AServiceStub(channel), pb03_grpc.A2AServiceStub(channel)
        plain = send10(v10, "hi", metadata=md(echo.key))
        assert plain.status.state == COMPLETED and agent_of(plain.id) == echo.path
        plain03 = send03(v03, "hi", metadata=md(echo.key))
        assert agent_of(plain03.id) == echo.path
        # A named agent still wins over the default.
        named = send10(v10, "hi", tenant=second.path, metadata=md(echo.key))
        assert agent_of(named.id) == second.path
        named03 = send03(v03, "hi", metadata=md(echo.key, agent=second.path))
        assert agent_of(named03.id) == second.path
        # So does the task's agent, for a call on a task.
        got = v10.GetTask(pb10.GetTaskRequest(id=named.id), metadata=md(echo.key))
        assert got.id == named.id
        # An unknown task id: the default agent answers that it has none such.
        expect(
            lambda: v10.GetTask(pb10.GetTaskRequest(id=str(uuid.uuid4())), metadata=md(echo.key)),
            "NOT_FOUND",
            "TASK_NOT_FOUND",
        )


def test_a_call_naming_no_agent_is_invalid_and_says_what_to_send(v10, v03, deploy):
    echo = deploy()
    request = pb10.SendMessageRequest(message=message10("hi"))
    for call in (
        lambda: v10.SendMessage(request, metadata=md(echo.key), timeout=TIMEOUT),
        lambda: v10.SendStreamingMessage(request, metadata=md(echo.key), timeout=TIMEOUT),
        lambda: v10.ListTasks(pb10.ListTasksRequest(), metadata=md(echo.key), timeout=TIMEOUT),
    ):
        message = expect(call, "INVALID_ARGUMENT", "INVALID_PARAMS")
        assert "'tenant'" in message and "a2a-agent" in message, message
    request03 = pb03.SendMessageRequest(request=message03("hi"))
    message = expect(
        lambda: v03.SendMessage(request03, metadata=md(echo.key), timeout=TIMEOUT),
        "INVALID_ARGUMENT",
        "INVALID_PARAMS",
    )
    assert message.startswith("InvalidParamsError: "), message
    assert "'tenant'" in message and "a2a-agent" in message, message
    # A task id that names no task, and no agent: the task is not found.
    expect(
        lambda: v10.GetTask(pb10.GetTaskRequest(id=str(uuid.uuid4())), metadata=md(echo.key)),
        "NOT_FOUND",
        "TASK_NOT_FOUND",
    )


def test_tenant_and_agent_metadata_disagreeing_or_malformed_are_invalid(v10, v03, deploy):
    echo = deploy("echo")
    second = deploy("second", tenant=echo.agent.tenant)

    def send(tenant: str, agent: str | None = None) -> Callable[[], Any]:
        request = pb10.SendMessageRequest(tenant=tenant, message=message10("hi"))
        return lambda: v10.SendMessage(request, metadata=md(echo.key, agent=agent), timeout=TIMEOUT)

    message = expect(send(echo.path, second.path), "INVALID_ARGUMENT", "INVALID_PARAMS")
    assert echo.path in message and second.path in message, message
    tenant_slug = echo.agent.tenant.slug
    for malformed in ("echo", f"{tenant_slug}/echo/extra", "/echo", f"{tenant_slug}/", "/"):
        message = expect(send(malformed), "INVALID_ARGUMENT", "INVALID_PARAMS")
        assert "'tenant'" in message, message
    request03 = pb03.SendMessageRequest(request=message03("hi"))
    for malformed in ("echo", f"{tenant_slug}/echo/extra", "/echo"):
        message = expect(
            lambda m=malformed: v03.SendMessage(
                request03, metadata=md(echo.key, agent=m), timeout=TIMEOUT
            ),
            "INVALID_ARGUMENT",
            "INVALID_PARAMS",
        )
        assert message.startswith("InvalidParamsError: ") and "a2a-agent" in message, message
    # Well-formed, but no such agent.
    assert fails(send(f"{tenant_slug}/nobody")).code == grpc.StatusCode.NOT_FOUND
    assert fails(send(f"no-such-tenant-{uuid.uuid4().hex[:8]}/echo")).code == (
        grpc.StatusCode.NOT_FOUND
    )
    # Nothing was created by any of these.
    assert not Task.objects.filter(agent__tenant=echo.agent.tenant).exists()


# --- (d) who may see a task ----------------------------------------------------------------------


def test_another_tenants_or_owners_task_is_not_found(v10, v03, deploy, make_key):
    mine = deploy("echo", delay_seconds=2)
    theirs = deploy("echo")  # another tenant
    bob = make_key(mine.agent.tenant, "bob")  # another owner in my tenant
    running = send10(v10, "mine", tenant=mine.path, metadata=md(mine.key), return_immediately=True)
    unknown = str(uuid.uuid4())

    def not_found(calls: dict[str, Callable[[], Any]], task_id: str, prefix: str = "") -> None:
        for name, call in calls.items():
            message = expect(call, "NOT_FOUND", "TASK_NOT_FOUND")
            if name != "send":
                # Word for word what an id that names no task gets: nothing tells them apart.
                assert message == f"{prefix}Task {task_id!r} was not found.", (name, message)

    def calls10(tenant: str, key: str | None, task_id: str) -> dict[str, Callable[[], Any]]:
        metadata = md(key)
        calls = {
            "get": lambda: v10.GetTask(
                pb10.GetTaskRequest(tenant=tenant, id=task_id), metadata=metadata
            ),
            "cancel": lambda: v10.CancelTask(
                pb10.CancelTaskRequest(tenant=tenant, id=task_id), metadata=metadata
            ),
            "subscribe": lambda: v10.SubscribeToTask(
                pb10.SubscribeToTaskRequest(tenant=tenant, id=task_id),
                metadata=metadata,
                timeout=TIMEOUT,
            ),
        }
        if tenant:  # (a v1.0 follow-up naming no tenant is routing's: test_routing_... has it)
            calls["send"] = lambda: v10.SendMessage(
                pb10.SendMessageRequest(tenant=tenant, message=message10("x", task_id=task_id)),
                metadata=metadata,
            )
        return calls

    def calls03(agent: str | None, key: str | None, task_id: str) -> dict[str, Callable[[], Any]]:
        metadata = md(key, agent=agent)
        return {
            "get": lambda: v03.GetTask(
                pb03.GetTaskRequest(name=f"tasks/{task_id}"), metadata=metadata
            ),
            "cancel": lambda: v03.CancelTask(
                pb03.CancelTaskRequest(name=f"tasks/{task_id}"), metadata=metadata
            ),
            "subscribe": lambda: v03.TaskSubscription(
                pb03.TaskSubscriptionRequest(name=f"tasks/{task_id}"),
                metadata=metadata,
                timeout=TIMEOUT,
            ),
            "send": lambda: v03.SendMessage(
                pb03.SendMessageRequest(request=message03("x", task_id=task_id)),
                metadata=metadata,
            ),
        }

    v03_prefix = "TaskNotFoundError: "
    for task_id in (running.id, unknown):
        # Another tenant's key, their agent named.
        not_found(calls10(theirs.path, theirs.key, task_id), task_id)
        not_found(calls03(theirs.path, theirs.key, task_id), task_id, v03_prefix)
        # Routed by the task (no agent named): their key, a bogus one or none is not let in,
        # and the answer does not say that the task exists (NOT_FOUND, not UNAUTHENTICATED).
        for key in (theirs.key, None, "a2a_bogus_key"):
            not_found(calls10("", key, task_id), task_id)
            not_found(calls03(None, key, task_id), task_id, v03_prefix)
        basic = [("authorization", f"Basic {mine.key}")]  # malformed credentials, too
        expect(
            lambda t=task_id, m=basic: v10.GetTask(pb10.GetTaskRequest(id=t), metadata=m),
            "NOT_FOUND",
            "TASK_NOT_FOUND",
        )
        # Another owner in my own tenant, naming my agent or routed by the task.
        for agent in (mine.path, ""):
            not_found(calls10(agent, bob, task_id), task_id)
            not_found(calls03(agent or None, bob, task_id), task_id, v03_prefix)
    # Naming my agent with their key is plainly unauthenticated (nothing about the task).
    expect(calls10(mine.path, theirs.key, running.id)["get"], "UNAUTHENTICATED", "UNAUTHENTICATED")
    # None of that touched my task, which is still there for me.
    got = v10.GetTask(pb10.GetTaskRequest(id=running.id), metadata=md(mine.key), timeout=TIMEOUT)
    assert got.id == running.id and got.status.state != pb10.TaskState.TASK_STATE_CANCELED


# --- (e) versions and credentials ---------------------------------------------------------------


def test_a2a_version_must_match_the_service(v10, v03, deploy):
    echo = deploy()
    get10 = pb10.GetTaskRequest(tenant=echo.path, id=str(uuid.uuid4()))
    get03 = pb03.GetTaskRequest(name=f"tasks/{uuid.uuid4()}")
    for version in ("99.0", "0.3", "not-a-version"):
        metadata = md(echo.key, version=version)
        message = expect(
            lambda m=metadata: v10.GetTask(get10, metadata=m, timeout=TIMEOUT),
            "UNIMPLEMENTED",
            "VERSION_NOT_SUPPORTED",
        )
        assert not message.startswith("VersionNotSupportedError"), message
    for version in ("99.0", "1.0"):
        metadata = md(echo.key, agent=echo.path, version=version)
        message = expect(
            lambda m=metadata: v03.GetTask(get03, metadata=m, timeout=TIMEOUT),
            "UNIMPLEMENTED",
            "VERSION_NOT_SUPPORTED",
        )
        assert message.startswith("VersionNotSupportedError: "), message
    # Streams are refused alike.
    subscribe = pb10.SubscribeToTaskRequest(tenant=echo.path, id=str(uuid.uuid4()))
    expect(
        lambda: v10.SubscribeToTask(subscribe, metadata=md(echo.key, version="99.0")),
        "UNIMPLEMENTED",
        "VERSION_NOT_SUPPORTED",
    )
    # The matching versions are served (the task is unknown, which is the point past the check).
    expect(
        lambda: v10.GetTask(get10, metadata=md(echo.key, version="1.0"), timeout=TIMEOUT),
        "NOT_FOUND",
        "TASK_NOT_FOUND",
    )
    expect(
        lambda: v03.GetTask(get03, metadata=md(echo.key, agent=echo.path, version="0.3")),
        "NOT_FOUND",
        "TASK_NOT_FOUND",
    )


def test_credentials(v10, v03, deploy, make_agent):
    echo = deploy()
    request = pb10.SendMessageRequest(tenant=echo.path, message=message10("hi"))
    request03 = pb03.SendMessageRequest(request=message03("hi"))
    for metadata in (
        [],
        [("x-api-key", "a2a_wrong_key")],
        [("authorization", f"Basic {echo.key}")],
    ):
        expect(
            lambda m=metadata: v10.SendMessage(request, metadata=m, timeout=TIMEOUT),
            "UNAUTHENTICATED",
            "UNAUTHENTICATED",
        )
        expect(
            lambda m=metadata: v03.SendMessage(
                request03, metadata=[*m, ("a2a-agent", echo.path)], timeout=TIMEOUT
            ),
            "UNAUTHENTICATED",
            "UNAUTHENTICATED",
        )
    bearer = [("authorization", f"Bearer {echo.key}")]
    assert v10.SendMessage(request, metadata=bearer, timeout=TIMEOUT).task.status.state == (
        COMPLETED
    )
    # A public agent serves anonymous calls, but its extended card still needs a key.
    public = make_agent(echo.agent.tenant, "public", visibility="public")
    path = f"{public.tenant.slug}/{public.slug}"
    anonymous = send10(v10, "hi", tenant=path)
    assert anonymous.status.state == COMPLETED
    expect(
        lambda: v10.GetExtendedAgentCard(pb10.GetExtendedAgentCardRequest(tenant=path)),
        "UNAUTHENTICATED",
        "UNAUTHENTICATED",
    )
    card = v10.GetExtendedAgentCard(
        pb10.GetExtendedAgentCardRequest(tenant=path), metadata=md(echo.key), timeout=TIMEOUT
    )
    assert card.name == "Public"


# --- (f) no error is UNKNOWN --------------------------------------------------------------------


def test_no_error_comes_back_unknown(v10, v03, deploy):
    echo = deploy()
    done = send10(v10, "done", tenant=echo.path, metadata=md(echo.key))
    key, path, unknown = echo.key, echo.path, str(uuid.uuid4())
    m10, m03 = md(key), md(key, agent=path)
    calls10: dict[str, Callable[[], Any]] = {
        "GetTask unknown": lambda: v10.GetTask(
            pb10.GetTaskRequest(tenant=path, id=unknown), metadata=m10
        ),
        "GetTask empty id": lambda: v10.GetTask(pb10.GetTaskRequest(tenant=path), metadata=m10),
        "GetTask not a uuid": lambda: v10.GetTask(
            pb10.GetTaskRequest(tenant=path, id="not-a-uuid"), metadata=m10
        ),
        "GetTask historyLength -1": lambda: v10.GetTask(
            pb10.GetTaskRequest(tenant=path, id=done.id, history_length=-1), metadata=m10
        ),
        "ListTasks pageSize 0": lambda: v10.ListTasks(
            pb10.ListTasksRequest(tenant=path, page_size=0), metadata=m10
        ),
        "ListTasks pageSize 101": lambda: v10.ListTasks(
            pb10.ListTasksRequest(tenant=path, page_size=101), metadata=m10
        ),
        "CancelTask completed": lambda: v10.CancelTask(
            pb10.CancelTaskRequest(tenant=path, id=done.id), metadata=m10
        ),
        "SubscribeToTask completed": lambda: v10.SubscribeToTask(
            pb10.SubscribeToTaskRequest(tenant=path, id=done.id), metadata=m10, timeout=TIMEOUT
        ),
        "SendMessage to a completed task": lambda: v10.SendMessage(
            pb10.SendMessageRequest(tenant=path, message=message10("x", task_id=done.id)),
            metadata=m10,
        ),
        "SendMessage without a message": lambda: v10.SendMessage(
            pb10.SendMessageRequest(tenant=path), metadata=m10
        ),
        "SendMessage without parts": lambda: v10.SendMessage(
            pb10.SendMessageRequest(
                tenant=path,
                message=pb10.Message(message_id="m", role=pb10.Role.ROLE_USER),
            ),
            metadata=m10,
        ),
        "SendStreamingMessage, no agent": lambda: v10.SendStreamingMessage(
            pb10.SendMessageRequest(message=message10("x")), metadata=m10, timeout=TIMEOUT
        ),
        "push config, private URL": lambda: v10.CreateTaskPushNotificationConfig(
            pb10.TaskPushNotificationConfig(tenant=path, task_id=done.id, url="http://10.0.0.1/"),
            metadata=m10,
        ),
        "push config unknown": lambda: v10.GetTaskPushNotificationConfig(
            pb10.GetTaskPushNotificationConfigRequest(tenant=path, task_id=done.id, id="nope"),
            metadata=m10,
        ),
        "version": lambda: v10.GetTask(
            pb10.GetTaskRequest(tenant=path, id=done.id), metadata=md(key, version="2.0")
        ),
        "no key": lambda: v10.GetTask(pb10.GetTaskRequest(tenant=path, id=done.id)),
        "extended card, no key": lambda: v10.GetExtendedAgentCard(
            pb10.GetExtendedAgentCardRequest(tenant=path)
        ),
        "unknown agent": lambda: v10.GetTask(
            pb10.GetTaskRequest(tenant=f"{path}-nobody", id=done.id), metadata=m10
        ),
        "malformed tenant": lambda: v10.GetTask(
            pb10.GetTaskRequest(tenant="x", id=done.id), metadata=m10
        ),
    }
    calls03: dict[str, Callable[[], Any]] = {
        "GetTask unknown": lambda: v03.GetTask(
            pb03.GetTaskRequest(name=f"tasks/{unknown}"), metadata=m03
        ),
        "GetTask not a resource name": lambda: v03.GetTask(
            pb03.GetTaskRequest(name="garbage"), metadata=m03
        ),
        "GetTask historyLength -1": lambda: v03.GetTask(
            pb03.GetTaskRequest(name=f"tasks/{done.id}", history_length=-1), metadata=m03
        ),
        "CancelTask completed": lambda: v03.CancelTask(
            pb03.CancelTaskRequest(name=f"tasks/{done.id}"), metadata=m03
        ),
        "TaskSubscription completed": lambda: v03.TaskSubscription(
            pb03.TaskSubscriptionRequest(name=f"tasks/{done.id}"), metadata=m03, timeout=TIMEOUT
        ),
        "SendMessage to a completed task": lambda: v03.SendMessage(
            pb03.SendMessageRequest(request=message03("x", task_id=done.id)), metadata=m03
        ),
        "SendMessage without a message": lambda: v03.SendMessage(
            pb03.SendMessageRequest(), metadata=m03
        ),
        "SendStreamingMessage, no agent": lambda: v03.SendStreamingMessage(
            pb03.SendMessageRequest(request=message03("x")), metadata=md(key), timeout=TIMEOUT
        ),
        "GetAgentCard, no key": lambda: v03.GetAgentCard(
            pb03.GetAgentCardRequest(), metadata=md(agent=path)
        ),
        "version": lambda: v03.GetTask(
            pb03.GetTaskRequest(name=f"tasks/{done.id}"), metadata=md(key, agent=path, version="9")
        ),
        "unknown agent": lambda: v03.GetTask(
            pb03.GetTaskRequest(name=f"tasks/{done.id}"), metadata=md(key, agent=f"{path}-x")
        ),
        "push config unknown": lambda: v03.GetTaskPushNotificationConfig(
            pb03.GetTaskPushNotificationConfigRequest(
                name=f"tasks/{done.id}/pushNotificationConfigs/nope"
            ),
            metadata=m03,
        ),
        "push config not a resource name": lambda: v03.DeleteTaskPushNotificationConfig(
            pb03.DeleteTaskPushNotificationConfigRequest(name=f"tasks/{done.id}"), metadata=m03
        ),
    }
    seen = {}
    for service, calls in ((V10_SERVICE, calls10), (V03_SERVICE, calls03)):
        for name, call in calls.items():
            failure = fails(call)  # asserts: not UNKNOWN, a Status with an A2A ErrorInfo
            if service == V03_SERVICE and failure.reason in A2A_REASON_TO_ERROR:
                cls = A2A_REASON_TO_ERROR[failure.reason]
                assert failure.message.startswith(f"{cls.__name__}: "), (name, failure)
            seen[(service, name)] = failure.code.name
    # And each is the error its call makes: none INTERNAL, none UNKNOWN.
    invalid, not_found, precondition = "INVALID_ARGUMENT", "NOT_FOUND", "FAILED_PRECONDITION"
    unauthenticated, unimplemented = "UNAUTHENTICATED", "UNIMPLEMENTED"
    expected10 = {
        "GetTask unknown": not_found,
        "GetTask empty id": invalid,
        "GetTask not a uuid": not_found,
        "GetTask historyLength -1": invalid,
        "ListTasks pageSize 0": invalid,
        "ListTasks pageSize 101": invalid,
        "CancelTask completed": precondition,
        "SubscribeToTask completed": precondition,
        "SendMessage to a completed task": precondition,
        "SendMessage without a message": invalid,
        "SendMessage without parts": invalid,
        "SendStreamingMessage, no agent": invalid,
        "push config, private URL": invalid,
        "push config unknown": not_found,
        "version": unimplemented,
        "no key": unauthenticated,
        "extended card, no key": unauthenticated,
        "unknown agent": not_found,
        "malformed tenant": invalid,
    }
    expected03 = {
        "GetTask unknown": not_found,
        "GetTask not a resource name": invalid,
        "GetTask historyLength -1": invalid,
        "CancelTask completed": precondition,
        "TaskSubscription completed": precondition,
        "SendMessage to a completed task": precondition,
        "SendMessage without a message": invalid,
        "SendStreamingMessage, no agent": invalid,
        "GetAgentCard, no key": unauthenticated,
        "version": unimplemented,
        "unknown agent": not_found,
        "push config unknown": not_found,
        "push config not a resource name": invalid,
    }
    assert seen == {
        **{(V10_SERVICE, name): code for name, code in expected10.items()},
        **{(V03_SERVICE, name): code for name, code in expected03.items()},
    }


def test_a_v03_stream_on_a_task_that_ended_at_once_ends_with_a_final_status_update(
    v03, live_platform, make_tenant, make_agent, make_key
):
    """A follow-up the agent completes in its first event: the stream opens with the task
    already completed, and v0.3 clients still get the final status update they wait for."""
    tenant = make_tenant()
    agent = make_agent(tenant, "conf", kind="conformance")
    metadata = md(make_key(tenant), agent=f"{tenant.slug}/{agent.slug}")
    ask = pb03.Message(
        message_id=f"tck-input-required-{uuid.uuid4()}",
        role=pb03.Role.ROLE_USER,
        content=[pb03.Part(text="first")],
    )
    asked = v03.SendMessage(pb03.SendMessageRequest(request=ask), metadata=metadata).task
    assert asked.status.state == pb03.TaskState.TASK_STATE_INPUT_REQUIRED
    more = message03("more", task_id=asked.id, context_id=asked.context_id)
    responses = list(
        v03.SendStreamingMessage(
            pb03.SendMessageRequest(request=more), metadata=metadata, timeout=TIMEOUT
        )
    )
    kinds = [r.WhichOneof("payload") for r in responses]
    assert kinds[0] == "task" and kinds[-1] == "status_update", kinds
    last = responses[-1].status_update
    assert last.final and last.status.state == V03_COMPLETED and last.task_id == asked.id
    assert not any(r.status_update.final for r in responses[:-1])


# --- (g) one task, JSON-RPC and gRPC -------------------------------------------------------------


def test_a_task_created_over_jsonrpc_is_read_and_streamed_over_grpc(v10, v03, deploy, http):
    echo = deploy(delay_seconds=2)
    created = http.post(
        echo.url,
        json=raw_send("from json-rpc", return_immediately=True),
        headers={"X-API-Key": echo.key, "A2A-Version": "1.0"},
    )
    assert created.status_code == 200, created.text
    task_id = created.json()["result"]["task"]["id"]
    subscription = v10.SubscribeToTask(
        pb10.SubscribeToTaskRequest(tenant=echo.path, id=task_id), metadata=md(echo.key)
    )
    events = list(subscription)
    kinds = [payload(e) for e in events]
    assert kinds[0] == "task" and events[0].task.id == task_id, kinds
    assert events[0].task.status.state != COMPLETED  # it was running when subscribed
    assert set(kinds[1:]) <= {"status_update", "artifact_update"}, kinds
    assert kinds[-1] == "status_update" and state_of(events[-1]) == COMPLETED, events[-1]
    streamed = [e.artifact_update.artifact for e in events if payload(e) == "artifact_update"]
    assert texts([*events[0].task.artifacts, *streamed]) == ["from json-rpc"]
    # Read over gRPC v1.0 and v0.3: the task JSON-RPC reads.
    over_grpc = v10.GetTask(
        pb10.GetTaskRequest(tenant=echo.path, id=task_id), metadata=md(echo.key)
    )
    over_jsonrpc = result_of(rpc(http, echo, "GetTask", {"id": task_id}))
    assert MessageToDict(over_grpc) == over_jsonrpc
    over_v03 = v03.GetTask(pb03.GetTaskRequest(name=f"tasks/{task_id}"), metadata=md(echo.key))
    assert over_v03.id == task_id and over_v03.status.state == V03_COMPLETED
    assert [p.text for a in over_v03.artifacts for p in a.parts] == ["from json-rpc"]


def test_a_task_created_over_grpc_is_read_and_streamed_over_jsonrpc(v10, deploy, http):
    echo = deploy(delay_seconds=2)
    task = send10(
        v10, "from grpc", tenant=echo.path, metadata=md(echo.key), return_immediately=True
    )
    assert task.status.state != COMPLETED
    events = jsonrpc_events(http, echo, "SubscribeToTask", {"id": task.id})
    kinds = [payload(e) for e in events]
    assert kinds[0] == "task" and events[0].task.id == task.id, kinds
    assert kinds[-1] == "status_update" and state_of(events[-1]) == COMPLETED, events[-1]
    streamed = [e.artifact_update.artifact for e in events if payload(e) == "artifact_update"]
    assert texts([*events[0].task.artifacts, *streamed]) == ["from grpc"]
    over_jsonrpc = result_of(rpc(http, echo, "GetTask", {"id": task.id}))
    over_grpc = v10.GetTask(
        pb10.GetTaskRequest(tenant=echo.path, id=task.id), metadata=md(echo.key)
    )
    assert over_jsonrpc == MessageToDict(over_grpc)
    assert over_jsonrpc["status"]["state"] == "TASK_STATE_COMPLETED"


# --- (h) SIGTERM drains ---------------------------------------------------------------------------


def test_sigterm_drains_an_open_stream_then_exits_zero(v10, deploy, sidecar):
    echo = deploy(delay_seconds=2)
    proc, address = sidecar("draining", A2A_GRPC_GRACE_SECONDS="8", A2A_DRAIN_SECONDS="7")
    task = send10(v10, "drained", tenant=echo.path, metadata=md(echo.key), return_immediately=True)
    with grpc.insecure_channel(address) as channel:
        stub = pb10_grpc.A2AServiceStub(channel)
        stream = stub.SubscribeToTask(
            pb10.SubscribeToTaskRequest(tenant=echo.path, id=task.id),
            metadata=md(echo.key),
            timeout=TIMEOUT,
        )
        first = next(stream)  # the stream is open and in flight
        assert payload(first) == "task" and first.task.status.state != COMPLETED
        proc.send_signal(signal.SIGTERM)
        rest = list(stream)  # raises if the stream is cut short with an error
    assert rest and payload(rest[-1]) == "status_update", rest
    assert state_of(rest[-1]) == COMPLETED, rest[-1]
    streamed = [e.artifact_update.artifact for e in rest if payload(e) == "artifact_update"]
    assert texts([*first.task.artifacts, *streamed]) == ["drained"]
    assert proc.wait(timeout=TIMEOUT) == 0


# --- (i) TLS -----------------------------------------------------------------------------------


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1/localhost: (cert file, key file)."""
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        import shutil

        require(bool(shutil.which("openssl")), "neither cryptography nor the openssl binary")
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout", str(key_file),
                "-out", str(cert_file), "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip
        return cert_file, key_file
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    os.chmod(key_file, 0o600)
    return cert_file, key_file


def test_tls(deploy, sidecar, tmp_path):
    import asyncio

    echo = deploy()
    cert_file, key_file = self_signed(tmp_path)
    _, address = sidecar(
        "tls", A2A_GRPC_TLS_CERT_FILE=str(cert_file), A2A_GRPC_TLS_KEY_FILE=str(key_file)
    )

    async def scenario() -> None:
        credentials = grpc.ssl_channel_credentials(root_certificates=cert_file.read_bytes())
        async with grpc.aio.secure_channel(address, credentials) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            answer = await health.Check(health_pb2.HealthCheckRequest(service=V10_SERVICE))
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
            stub = pb10_grpc.A2AServiceStub(channel)
            request = pb10.SendMessageRequest(tenant=echo.path, message=message10("secure"))
            response = await stub.SendMessage(request, metadata=md(echo.key), timeout=TIMEOUT)
            assert response.task.status.state == COMPLETED
            assert texts(response.task.artifacts) == ["secure"]
        # Plaintext is not served on the TLS port.
        async with grpc.aio.insecure_channel(address) as plain:
            health = health_pb2_grpc.HealthStub(plain)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE

    asyncio.run(scenario())


# --- (j) ListTasks paging, (k) push configs ----------------------------------------------------


def test_list_tasks_pages_with_tokens(v10, deploy):
    echo = deploy()
    context = str(uuid.uuid4())
    metadata = md(echo.key)
    ids = [
        send10(v10, f"n{n}", tenant=echo.path, metadata=metadata, context_id=context).id
        for n in range(3)
    ]
    send10(v10, "elsewhere", tenant=echo.path, metadata=metadata)
    pages, token = [], ""
    for _ in range(5):
        request = pb10.ListTasksRequest(
            tenant=echo.path, context_id=context, page_size=2, page_token=token
        )
        page = v10.ListTasks(request, metadata=metadata, timeout=TIMEOUT)
        pages.append(page)
        token = page.next_page_token
        if not token:
            break
    assert [len(p.tasks) for p in pages] == [2, 1]
    assert [(p.total_size, p.page_size) for p in pages] == [(3, 2), (3, 2)]
    assert [t.id for p in pages for t in p.tasks] == ids[::-1]  # the most recently updated first
    assert all(t.context_id == context for p in pages for t in p.tasks)
    everything = v10.ListTasks(pb10.ListTasksRequest(tenant=echo.path), metadata=metadata)
    assert everything.total_size == 4 and not everything.next_page_token
    for bad in (
        pb10.ListTasksRequest(tenant=echo.path, page_size=0),
        pb10.ListTasksRequest(tenant=echo.path, page_token="not-a-token"),
    ):
        expect(
            lambda b=bad: v10.ListTasks(b, metadata=metadata, timeout=TIMEOUT),
            "INVALID_ARGUMENT",
            "INVALID_PARAMS",
        )


# Push URLs on this machine: the live platform allowlists loopback (A2A_PUSH_ALLOWED_NETWORKS);
# nothing needs to listen there for CRUD.
HOOK = "http://127.0.0.1:9/hook"


def test_push_config_crud_v10(v10, deploy):
    echo = deploy()
    m10 = md(echo.key)
    task = send10(v10, "x", tenant=echo.path, metadata=m10)

    def call(method: Any, request: Any) -> Any:
        return method(request, metadata=m10, timeout=TIMEOUT)

    # Named by tenant, and routed by the task (no tenant): the same configs.
    for tenant in (echo.path, ""):
        created = call(
            v10.CreateTaskPushNotificationConfig,
            pb10.TaskPushNotificationConfig(
                tenant=tenant, task_id=task.id, id="c1", url=HOOK, token="secret"
            ),
        )
        # Without the token: it is write-only.
        assert created == pb10.TaskPushNotificationConfig(task_id=task.id, id="c1", url=HOOK)
        generated = call(
            v10.CreateTaskPushNotificationConfig,
            pb10.TaskPushNotificationConfig(tenant=tenant, task_id=task.id, url=HOOK),
        )
        assert uuid.UUID(generated.id) and generated.task_id == task.id
        got = call(
            v10.GetTaskPushNotificationConfig,
            pb10.GetTaskPushNotificationConfigRequest(tenant=tenant, task_id=task.id, id="c1"),
        )
        assert got == created
        listed = call(
            v10.ListTaskPushNotificationConfigs,
            pb10.ListTaskPushNotificationConfigsRequest(tenant=tenant, task_id=task.id),
        )
        assert sorted(c.id for c in listed.configs) == sorted(["c1", generated.id])
        # A page at a time.
        first = call(
            v10.ListTaskPushNotificationConfigs,
            pb10.ListTaskPushNotificationConfigsRequest(
                tenant=tenant, task_id=task.id, page_size=1
            ),
        )
        assert len(first.configs) == 1 and first.next_page_token
        for config_id in ("c1", generated.id):
            deleted = call(
                v10.DeleteTaskPushNotificationConfig,
                pb10.DeleteTaskPushNotificationConfigRequest(
                    tenant=tenant, task_id=task.id, id=config_id
                ),
            )
            assert deleted == empty_pb2.Empty()
        expect(
            lambda t=tenant: call(
                v10.GetTaskPushNotificationConfig,
                pb10.GetTaskPushNotificationConfigRequest(tenant=t, task_id=task.id, id="c1"),
            ),
            "NOT_FOUND",
            "TASK_NOT_FOUND",
        )
        empty = call(
            v10.ListTaskPushNotificationConfigs,
            pb10.ListTaskPushNotificationConfigsRequest(tenant=tenant, task_id=task.id),
        )
        assert list(empty.configs) == []
    # What is refused, and why: a delete must name its config.
    call(
        v10.CreateTaskPushNotificationConfig,
        pb10.TaskPushNotificationConfig(tenant=echo.path, task_id=task.id, id="kept", url=HOOK),
    )
    expect(
        lambda: call(
            v10.DeleteTaskPushNotificationConfig,
            pb10.DeleteTaskPushNotificationConfigRequest(tenant=echo.path, task_id=task.id),
        ),
        "INVALID_ARGUMENT",
        "INVALID_PARAMS",
    )
    kept = call(
        v10.ListTaskPushNotificationConfigs,
        pb10.ListTaskPushNotificationConfigsRequest(tenant=echo.path, task_id=task.id),
    )
    assert [c.id for c in kept.configs] == ["kept"]
    message = expect(
        lambda: call(
            v10.CreateTaskPushNotificationConfig,
            pb10.TaskPushNotificationConfig(
                tenant=echo.path, task_id=task.id, url="http://10.0.0.1/hook"
            ),
        ),
        "INVALID_ARGUMENT",
        "INVALID_PARAMS",
    )
    assert "10.0.0.1 is a private address" in message, message
    expect(
        lambda: call(
            v10.ListTaskPushNotificationConfigs,
            pb10.ListTaskPushNotificationConfigsRequest(
                tenant=echo.path, task_id=task.id, page_size=101
            ),
        ),
        "INVALID_ARGUMENT",
        "INVALID_PARAMS",
    )


def test_push_config_crud_v03(v10, v03, deploy):
    echo = deploy()
    task = send10(v10, "x", tenant=echo.path, metadata=md(echo.key))
    parent, name = f"tasks/{task.id}", f"tasks/{task.id}/pushNotificationConfigs/c1"

    # Named by a2a-agent metadata, and routed by the task (none).
    for agent in (echo.path, None):
        m03 = md(echo.key, agent=agent)

        def call(method: Any, request: Any, m03: Any = m03) -> Any:
            return method(request, metadata=m03, timeout=TIMEOUT)

        config = pb03.TaskPushNotificationConfig(
            push_notification_config=pb03.PushNotificationConfig(id="c1", url=HOOK, token="secret"),
        )
        created = call(
            v03.CreateTaskPushNotificationConfig,
            pb03.CreateTaskPushNotificationConfigRequest(
                parent=parent, config_id="c1", config=config
            ),
        )
        assert created.name == name
        # Without the token: it is write-only.
        assert created.push_notification_config == pb03.PushNotificationConfig(id="c1", url=HOOK)
        # The id may come as `config_id` alone, or not at all (generated).
        by_config_id = call(
            v03.CreateTaskPushNotificationConfig,
            pb03.CreateTaskPushNotificationConfigRequest(
                parent=parent,
                config_id="c2",
                config=pb03.TaskPushNotificationConfig(
                    push_notification_config=pb03.PushNotificationConfig(url=HOOK)
                ),
            ),
        )
        assert by_config_id.name == f"{parent}/pushNotificationConfigs/c2"
        generated = call(
            v03.CreateTaskPushNotificationConfig,
            pb03.CreateTaskPushNotificationConfigRequest(
                parent=parent,
                config=pb03.TaskPushNotificationConfig(
                    push_notification_config=pb03.PushNotificationConfig(url=HOOK)
                ),
            ),
        )
        generated_id = generated.push_notification_config.id
        assert uuid.UUID(generated_id)
        assert generated.name == f"{parent}/pushNotificationConfigs/{generated_id}"
        got = call(
            v03.GetTaskPushNotificationConfig,
            pb03.GetTaskPushNotificationConfigRequest(name=name),
        )
        assert got == created
        listed = call(
            v03.ListTaskPushNotificationConfig,
            pb03.ListTaskPushNotificationConfigRequest(parent=parent),
        )
        assert sorted(c.push_notification_config.id for c in listed.configs) == sorted(
            ["c1", "c2", generated_id]
        )
        for config_id in ("c1", "c2", generated_id):
            deleted = call(
                v03.DeleteTaskPushNotificationConfig,
                pb03.DeleteTaskPushNotificationConfigRequest(
                    name=f"{parent}/pushNotificationConfigs/{config_id}"
                ),
            )
            assert deleted == empty_pb2.Empty()
        message = expect(
            lambda call=call: call(
                v03.GetTaskPushNotificationConfig,
                pb03.GetTaskPushNotificationConfigRequest(name=name),
            ),
            "NOT_FOUND",
            "TASK_NOT_FOUND",
        )
        assert message.startswith("TaskNotFoundError: "), message
        empty = call(
            v03.ListTaskPushNotificationConfig,
            pb03.ListTaskPushNotificationConfigRequest(parent=parent),
        )
        assert list(empty.configs) == []

    # Malformed resource names are invalid arguments.
    m03 = md(echo.key, agent=echo.path)
    malformed = [
        lambda: v03.CreateTaskPushNotificationConfig(
            pb03.CreateTaskPushNotificationConfigRequest(parent="task/x"), metadata=m03
        ),
        lambda: v03.CreateTaskPushNotificationConfig(
            pb03.CreateTaskPushNotificationConfigRequest(parent=f"{parent}/more"), metadata=m03
        ),
        lambda: v03.ListTaskPushNotificationConfig(
            pb03.ListTaskPushNotificationConfigRequest(parent=""), metadata=m03
        ),
        lambda: v03.GetTaskPushNotificationConfig(
            pb03.GetTaskPushNotificationConfigRequest(name=f"{parent}/pushNotificationConfigs/"),
            metadata=m03,
        ),
        lambda: v03.GetTaskPushNotificationConfig(
            pb03.GetTaskPushNotificationConfigRequest(name=f"{name}/x"), metadata=m03
        ),
        lambda: v03.DeleteTaskPushNotificationConfig(
            pb03.DeleteTaskPushNotificationConfigRequest(name=parent), metadata=m03
        ),
        lambda: v03.DeleteTaskPushNotificationConfig(
            pb03.DeleteTaskPushNotificationConfigRequest(name="garbage"), metadata=m03
        ),
    ]
    for bad in malformed:
        message = expect(bad, "INVALID_ARGUMENT", "INVALID_PARAMS")
        assert message.startswith("InvalidParamsError: "), message
    # A private URL, with the reason.
    message = expect(
        lambda: v03.CreateTaskPushNotificationConfig(
            pb03.CreateTaskPushNotificationConfigRequest(
                parent=parent,
                config=pb03.TaskPushNotificationConfig(
                    push_notification_config=pb03.PushNotificationConfig(url="http://10.0.0.1/")
                ),
            ),
            metadata=m03,
        ),
        "INVALID_ARGUMENT",
        "INVALID_PARAMS",
    )
    assert "10.0.0.1 is a private address" in message, message


def test_push_config_calls_of_an_agent_without_push_are_not_supported(v10, v03, deploy):
    echo = deploy(push_notifications=False)
    task = send10(v10, "x", tenant=echo.path, metadata=md(echo.key))
    name = f"tasks/{task.id}/pushNotificationConfigs/c1"

    def calls10(tenant: str) -> list[Callable[[], Any]]:
        m10 = md(echo.key)
        return [
            lambda: v10.CreateTaskPushNotificationConfig(
                pb10.TaskPushNotificationConfig(tenant=tenant, task_id=task.id, id="c1", url=HOOK),
                metadata=m10,
            ),
            lambda: v10.GetTaskPushNotificationConfig(
                pb10.GetTaskPushNotificationConfigRequest(tenant=tenant, task_id=task.id, id="c1"),
                metadata=m10,
            ),
            lambda: v10.ListTaskPushNotificationConfigs(
                pb10.ListTaskPushNotificationConfigsRequest(tenant=tenant, task_id=task.id),
                metadata=m10,
            ),
            lambda: v10.DeleteTaskPushNotificationConfig(
                pb10.DeleteTaskPushNotificationConfigRequest(
                    tenant=tenant, task_id=task.id, id="c1"
                ),
                metadata=m10,
            ),
        ]

    def calls03(agent: str | None) -> list[Callable[[], Any]]:
        m03 = md(echo.key, agent=agent)
        config = pb03.TaskPushNotificationConfig(
            name=name,
            push_notification_config=pb03.PushNotificationConfig(id="c1", url=HOOK),
        )
        return [
            lambda: v03.CreateTaskPushNotificationConfig(
                pb03.CreateTaskPushNotificationConfigRequest(
                    parent=f"tasks/{task.id}", config_id="c1", config=config
                ),
                metadata=m03,
            ),
            lambda: v03.GetTaskPushNotificationConfig(
                pb03.GetTaskPushNotificationConfigRequest(name=name), metadata=m03
            ),
            lambda: v03.ListTaskPushNotificationConfig(
                pb03.ListTaskPushNotificationConfigRequest(parent=f"tasks/{task.id}"),
                metadata=m03,
            ),
            lambda: v03.DeleteTaskPushNotificationConfig(
                pb03.DeleteTaskPushNotificationConfigRequest(name=name), metadata=m03
            ),
        ]

    for call in calls10(echo.path):
        message = expect(call, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED")
        assert "push notifications" in message, message
    for call in calls03(echo.path):
        message = expect(call, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED")
        assert message.startswith("PushNotificationNotSupportedError: "), message
    # Naming no agent, on the task: routed by the task, as every other call on a task is.
    for call in calls10(""):
        expect(call, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED")
    for call in calls03(None):
        expect(call, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED")


# --- edges found in review ------------------------------------------------------------------


def test_push_calls_do_not_reveal_another_owners_task(v10, v03, deploy, make_key):
    mine = deploy("echo")
    bob = make_key(mine.agent.tenant, "bob")
    task = send10(v10, "mine", tenant=mine.path, metadata=md(mine.key))
    request = pb10.TaskPushNotificationConfig(task_id=task.id, url=HOOK)
    # Named agent or routed by the task: bob gets what an unknown task gets.
    for tenant in (mine.path, ""):
        request.tenant = tenant
        expect(
            lambda: v10.CreateTaskPushNotificationConfig(request, metadata=md(bob)),
            "NOT_FOUND",
            "TASK_NOT_FOUND",
        )
    parent = pb03.CreateTaskPushNotificationConfigRequest(parent=f"tasks/{task.id}")
    expect(
        lambda: v03.CreateTaskPushNotificationConfig(parent, metadata=md(bob)),
        "NOT_FOUND",
        "TASK_NOT_FOUND",
    )


def test_a_deactivated_agents_task_routed_by_id_is_simply_not_found(v10, deploy):
    gone = deploy("echo")
    task = send10(v10, "hello", tenant=gone.path, metadata=md(gone.key))
    gone.agent.is_active = False
    gone.agent.save()
    message = expect(
        lambda: v10.GetTask(pb10.GetTaskRequest(id=task.id), metadata=md()),
        "NOT_FOUND",
        "TASK_NOT_FOUND",
    )
    assert gone.agent.slug not in message.replace(task.id, "")


@pytest.mark.parametrize(
    "path, streaming",
    [
        ("/lf.a2a.v1.A2AService/SendMessage", False),
        ("/lf.a2a.v1.A2AService/SendStreamingMessage", True),
        ("/a2a.v1.A2AService/GetTask", False),
        ("/a2a.v1.A2AService/TaskSubscription", True),
        ("/a2a.A2AService/ListTask", False),
    ],
)
def test_bytes_that_are_not_the_message_are_invalid_arguments(channel, deploy, path, streaming):
    """grpcio's generated handlers answer undecodable requests before the servicer runs; the
    platform decodes them itself and answers INVALID_ARGUMENT with an ErrorInfo."""
    target = deploy("echo")
    raw = (channel.unary_stream if streaming else channel.unary_unary)(
        path, request_serializer=None, response_deserializer=None
    )

    def call() -> Any:
        answer = raw(b"\xff\xff\xff\xff", metadata=md(target.key), timeout=10)
        return list(answer) if streaming else answer

    message = expect(call, "INVALID_ARGUMENT", "INVALID_PARAMS")
    assert "is not a valid" in message, message


def test_bad_strings_and_values_are_invalid_arguments_not_internal(v10, deploy):
    target = deploy("echo")
    metadata = md(target.key)
    nul = pb10.SendMessageRequest(tenant=target.path, message=message10("a\x00b"))
    assert "NUL" in expect(
        lambda: v10.SendMessage(nul, metadata=metadata), "INVALID_ARGUMENT", "INVALID_PARAMS"
    )
    long = pb10.GetTaskRequest(tenant="t" * 5000 + "/a", id=str(uuid.uuid4()))
    expect(lambda: v10.GetTask(long, metadata=metadata), "INVALID_ARGUMENT", "INVALID_PARAMS")
    listing = pb10.ListTasksRequest(tenant=target.path)
    listing.status_timestamp_after.seconds = 10**15
    assert "status_timestamp_after" in expect(
        lambda: v10.ListTasks(listing, metadata=metadata), "INVALID_ARGUMENT", "INVALID_PARAMS"
    )


def test_errors_quoting_a_huge_request_stay_within_the_trailer_limits(v03, deploy):
    """Error messages quote the request (a task's resource name here); a name of 400 KB made
    trailers no client accepts, and the call ended RESOURCE_EXHAUSTED on the client's side.
    The message is cut to MESSAGE_BYTES, and the status still carries its ErrorInfo."""
    target = deploy("echo")
    metadata = md(target.key, agent=target.path)
    for name in ("x" * 400_000, "\u00e9" * 100_000):
        request = pb03.CancelTaskRequest(name=name)
        message = expect(
            lambda request=request: v03.CancelTask(request, metadata=metadata, timeout=TIMEOUT),
            "INVALID_ARGUMENT",
            "INVALID_PARAMS",
        )
        # v0.3 names the error's class first.
        assert message.startswith("InvalidParamsError: No task for "), message[:80]
        assert message.endswith("\u2026"), message[-40:]
        assert len(message.removeprefix("InvalidParamsError: ").encode()) <= MESSAGE_BYTES


def test_single_valued_metadata_sent_twice_with_different_values_is_refused(v10, deploy):
    target = deploy("echo")
    request = pb10.ListTasksRequest(tenant=target.path)
    twice = md(target.key) + [("a2a-version", "0.3"), ("a2a-version", "1.0")]
    assert "a2a-version" in expect(
        lambda: v10.ListTasks(request, metadata=twice), "INVALID_ARGUMENT", "INVALID_PARAMS"
    )


def test_answers_larger_than_the_request_limit_are_sent(v10, deploy, sidecar):
    target = deploy("echo")
    _, address = sidecar("small", A2A_GRPC_MAX_MESSAGE_BYTES="2000")
    text = "x" * 1500  # the echo answer (history + artifact + status) is far over 2000 bytes
    with grpc.insecure_channel(address) as small:
        stub = pb10_grpc.A2AServiceStub(small)
        task = send10(stub, text, tenant=target.path, metadata=md(target.key))
    assert texts(task.artifacts) == [text]
