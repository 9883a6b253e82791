"""Every gRPC surface a protocol document defines, spoken as that document writes it, against
the live sidecar: its service name, its method names and its message shapes.

- the v1 draft proto (a2a-v1-draft.proto, package a2a.v1): a client built from our declaration
  of it (protos/a2a_v1_draft.proto), compiled here into a descriptor pool of its own;
- the transport mapping table (a2a-transport-mapping.md): `a2a.A2AService` with the table's
  names and payloads (protos/a2a_transport_mapping.proto);
- the v0.3 method tables (a2a-v0.3.0-specification.txt 3.5.6, a2a-v0.3.0-endpoints-zh.md 2.1)
  and the v0.3.0 specification's normative proto (the a2a-sdk's v0.3 stubs);
- the v1.0.1 specification and proto (`lf.a2a.v1.A2AService`, the a2a-sdk's stubs).

Each method: a call that succeeds, with its answer's shape checked; each method on a task: an
unknown task id is NOT_FOUND. Routing, credentials and errors in depth are test_grpc.py's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import grpc
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc as pb03_grpc
from a2a.types import a2a_pb2 as pb10
from a2a.types import a2a_pb2_grpc as pb10_grpc
from google.protobuf import descriptor_pb2, empty_pb2, message_factory
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_tools import protoc

from .helpers import Target

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PROTOS = Path(__file__).parent / "protos"
TIMEOUT = 30  # seconds per call
HOOK = "http://127.0.0.1:9/hook"  # loopback: the tests' SSRF allowlist lets it through
V10_SERVICE = "lf.a2a.v1.A2AService"
V03_SERVICE = "a2a.v1.A2AService"
TABLE_SERVICE = "a2a.A2AService"  # a2a-transport-mapping.md: "gRPC: :{root_url}/a2a.A2AService/"

# The method names each document gives its service.
DRAFT_METHODS = {
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "SetTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfig",
    "GetExtendedAgentCard",
    "DeleteTaskPushNotificationConfig",
}
TABLE_METHODS = {
    "GetTask",
    "CancelTask",
    "SendMessage",
    "SendStreamingMessage",
    "TaskSubscription",
    "GetTaskPushNotification",
    "CreateTaskPushNotification",
    "GetAgentCard",
    "ListTaskPushNotification",
    "ListTask",
}
V03_TABLE_METHODS = {  # v0.3.0 specification 3.5.6 and the endpoint summary's 2.1: one table
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTask",
    "CancelTask",
    "TaskSubscription",
    "CreateTaskPushNotification",
    "GetTaskPushNotification",
    "ListTaskPushNotification",
    "DeleteTaskPushNotification",
    "GetAgentCard",
}
V03_PROTO_METHODS = {m.name for m in pb03.DESCRIPTOR.services_by_name["A2AService"].methods}
V10_METHODS = {m.name for m in pb10.DESCRIPTOR.services_by_name["A2AService"].methods}


# --- a document's client -------------------------------------------------------------------------


@dataclass(frozen=True)
class Declared:
    """Protos compiled from our declarations of the documents, in a pool of their own."""

    pool: DescriptorPool

    def message(self, full_name: str) -> Any:
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full_name))


@dataclass(frozen=True)
class Client:
    """A client of one service as a document names it: calls go to `/<service>/<method>`."""

    channel: grpc.Channel
    service: str
    metadata: list[tuple[str, str]]

    def call(self, method: str, request: Message, answer: Any) -> Any:
        stub = self.channel.unary_unary(
            f"/{self.service}/{method}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=answer.FromString,
        )
        return stub(request, metadata=self.metadata, timeout=TIMEOUT)

    def stream(self, method: str, request: Message, answer: Any) -> list[Any]:
        stub = self.channel.unary_stream(
            f"/{self.service}/{method}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=answer.FromString,
        )
        return list(stub(request, metadata=self.metadata, timeout=TIMEOUT))

    def declared(self, declared: Declared, method: str, **fields: Any) -> Any:
        """Call `method` as the declaration's service defines it (its request and answer)."""
        described = declared.pool.FindServiceByName(self.service).methods_by_name[method]
        request = message_factory.GetMessageClass(described.input_type)(**fields)
        answer = message_factory.GetMessageClass(described.output_type)
        if described.server_streaming:
            return self.stream(method, request, answer)
        return self.call(method, request, answer)


def not_found(call: Callable[[], Any]) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        result = call()
        if isinstance(result, Iterator):
            list(result)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND, caught.value.details()


def texts(artifacts: Any) -> list[str]:
    return [part.text for artifact in artifacts for part in artifact.parts]


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def declared(tmp_path_factory: pytest.TempPathFactory) -> Declared:
    """tests/e2e/protos compiled with protoc (grpc_tools) into a descriptor set, loaded into a
    new pool: the default pool holds the a2a-sdk's v0.3 file, whose package is the draft's."""
    out = tmp_path_factory.mktemp("protos") / "documents.pb"
    well_known = resources.files("grpc_tools") / "_proto"
    code = protoc.main(
        [
            "protoc",
            f"-I{PROTOS}",
            f"-I{well_known}",
            "--include_imports",
            f"--descriptor_set_out={out}",
            "a2a_v1_draft.proto",
            "a2a_transport_mapping.proto",
        ]
    )
    assert code == 0, "protoc failed on tests/e2e/protos"
    pool = DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.AddSerializedFile(file.SerializeToString())
    return Declared(pool)


@pytest.fixture
def channel(live_platform: Any) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(live_platform.grpc_address) as ch:
        yield ch


@dataclass(frozen=True)
class Agents:
    """An echo agent and a slow one (two seconds a turn) in one tenant, and a key of it."""

    echo: Target
    slow: Target

    def metadata(self, target: Target) -> list[tuple[str, str]]:
        return [("x-api-key", target.key), ("a2a-agent", target.tenant_value)]


@pytest.fixture
def agents(make_target: Callable[..., Target]) -> Agents:
    echo = make_target("echo", push_notifications=True)
    slow = make_target(
        "slow", tenant=echo.agent.tenant, config={"delay_seconds": 2}, push_notifications=True
    )
    slow.key = echo.key
    return Agents(echo, slow)


# --- reflection ----------------------------------------------------------------------------------


def test_reflection_lists_every_service_name_with_every_method(channel):
    """What `grpcurl list` and `grpcurl describe` show: the three A2A services; a2a.v1 and a2a
    with every name any document gives them, their messages resolvable from the files served."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    services = (V10_SERVICE, V03_SERVICE, TABLE_SERVICE)
    requests = [reflection_pb2.ServerReflectionRequest(list_services="")] + [
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=s) for s in services
    ]
    listed, *described = list(stub.ServerReflectionInfo(iter(requests), timeout=TIMEOUT))
    assert set(services) <= {s.name for s in listed.list_services_response.service}
    pool = DescriptorPool()
    files = {
        file.name: file
        for response in described
        for raw in response.file_descriptor_response.file_descriptor_proto
        for file in [descriptor_pb2.FileDescriptorProto.FromString(raw)]
    }

    def add(name: str) -> None:  # dependencies first, as a pool needs them
        file = files.pop(name, None)
        if file is not None:
            for dependency in file.dependency:
                add(dependency)
            pool.AddSerializedFile(file.SerializeToString())

    while files:
        add(next(iter(files)))
    methods = {s: pool.FindServiceByName(s).methods_by_name for s in services}
    assert set(methods[V10_SERVICE]) == V10_METHODS
    every_v03 = DRAFT_METHODS | TABLE_METHODS | V03_TABLE_METHODS | V03_PROTO_METHODS
    assert set(methods[V03_SERVICE]) == every_v03
    assert set(methods[TABLE_SERVICE]) == every_v03
    # The draft's ListTasks as the draft numbers it; the table's ListTask takes the same.
    for service in (V03_SERVICE, TABLE_SERVICE):
        request = methods[service]["ListTasks"].input_type
        assert {f.name: f.number for f in request.fields} == {
            "context_id": 1,
            "status": 2,
            "page_size": 3,
            "page_token": 4,
            "history_length": 5,
            "last_updated_after": 6,
            "include_artifacts": 7,
            "metadata": 8,
        }
        answer = methods[service]["ListTask"].output_type
        assert answer.fields_by_number[1].name == "tasks"
        assert methods[service]["SubscribeToTask"].server_streaming
    health = health_pb2_grpc.HealthStub(channel)
    for service in services:
        answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING, service
    # The v0.3 proto's methods keep their own description (with its HTTP options).
    send = methods[V03_SERVICE]["SendMessage"]
    assert send.input_type.full_name == "a2a.v1.SendMessageRequest"
    assert send.GetOptions().ListFields(), "the v0.3 proto's options were lost"


# --- the v1 draft proto --------------------------------------------------------------------------


def test_v1_draft_proto_every_method(channel, declared, agents):
    """a2a-v1-draft.proto, `service A2AService` (package a2a.v1), all eleven rpcs with the
    draft's request and response messages (protos/a2a_v1_draft.proto)."""
    draft = Client(channel, V03_SERVICE, agents.metadata(agents.echo))
    slow = Client(channel, V03_SERVICE, agents.metadata(agents.slow))
    Message_ = declared.message("a2a.v1.Message")
    Part = declared.message("a2a.v1.Part")
    Config = declared.message("a2a.v1.SendMessageConfiguration")
    completed = (
        declared.pool.FindEnumTypeByName("a2a.v1.TaskState")
        .values_by_name["TASK_STATE_COMPLETED"]
        .number
    )

    def message(text: str) -> Any:
        return Message_(
            message_id=str(uuid.uuid4()), role=1, parts=[Part(text=text)], reference_task_ids=[]
        )

    # SendMessage: the task, done; SendStreamingMessage: the task, then its events.
    sent = draft.declared(declared, "SendMessage", request=message("hi"))
    assert sent.WhichOneof("payload") == "task", sent
    task = sent.task
    assert task.status.state == completed and texts(task.artifacts) == ["hi"]
    events = draft.declared(declared, "SendStreamingMessage", request=message("stream"))
    assert events[0].WhichOneof("payload") == "task"
    assert events[-1].status_update.final and events[-1].status_update.status.state == completed
    assert "stream" in [p.text for e in events for p in e.artifact_update.artifact.parts]

    # GetTask (`name: tasks/{id}`, `optional history_length`) and ListTasks.
    got = draft.declared(declared, "GetTask", name=f"tasks/{task.id}", history_length=1)
    assert got.id == task.id and got.context_id == task.context_id and len(got.history) == 1
    listed = draft.declared(
        declared, "ListTasks", status=completed, page_size=50, include_artifacts=True
    )
    assert task.id in [t.id for t in listed.tasks] and listed.page_size == 50
    assert listed.total_size >= 2 and all(t.status.state == completed for t in listed.tasks)
    assert texts(next(t for t in listed.tasks if t.id == task.id).artifacts) == ["hi"]
    bare = draft.declared(declared, "ListTasks", context_id=task.context_id)
    assert [t.id for t in bare.tasks] == [task.id] and not bare.tasks[0].artifacts

    # CancelTask and SubscribeToTask: on tasks still running.
    later = Config(blocking=False)
    running = slow.declared(declared, "SendMessage", request=message("a"), configuration=later)
    canceled = slow.declared(declared, "CancelTask", name=f"tasks/{running.task.id}")
    assert canceled.id == running.task.id and canceled.status.state == 5  # CANCELLED
    running = slow.declared(declared, "SendMessage", request=message("b"), configuration=later)
    followed = slow.declared(declared, "SubscribeToTask", name=f"tasks/{running.task.id}")
    assert followed[0].task.id == running.task.id
    assert followed[-1].status_update.final
    assert followed[-1].status_update.status.state == completed

    # The push config calls.
    parent = f"tasks/{task.id}"
    PushConfig = declared.message("a2a.v1.PushNotificationConfig")
    TaskPushConfig = declared.message("a2a.v1.TaskPushNotificationConfig")
    config = TaskPushConfig(push_notification_config=PushConfig(url=HOOK, token="t"))
    created = draft.declared(
        declared, "SetTaskPushNotificationConfig", parent=parent, config_id="c1", config=config
    )
    name = f"{parent}/pushNotificationConfigs/c1"
    assert created.name == name and created.push_notification_config.url == HOOK
    assert created.push_notification_config.id == "c1"
    got_config = draft.declared(declared, "GetTaskPushNotificationConfig", name=name)
    assert got_config == created
    configs = draft.declared(declared, "ListTaskPushNotificationConfig", parent=parent)
    assert list(configs.configs) == [created] and configs.next_page_token == ""
    deleted = draft.declared(declared, "DeleteTaskPushNotificationConfig", name=name)
    assert deleted.DESCRIPTOR.full_name == "google.protobuf.Empty" and not deleted.ListFields()
    assert not draft.declared(declared, "ListTaskPushNotificationConfig", parent=parent).configs

    # GetExtendedAgentCard: the draft's card, `supported_interfaces` (19) included.
    card = draft.declared(declared, "GetExtendedAgentCard")
    assert card.name == agents.echo.agent.name and card.capabilities.push_notifications
    bindings = {i.protocol_binding for i in card.supported_interfaces}
    assert {"JSONRPC", "HTTP+JSON"} <= bindings, card
    assert card.supported_interfaces[0].url == card.url

    # An unknown task.
    unknown = f"tasks/{uuid.uuid4()}"
    for method, fields in (
        ("GetTask", {"name": unknown}),
        ("CancelTask", {"name": unknown}),
        ("SubscribeToTask", {"name": unknown}),
        ("SetTaskPushNotificationConfig", {"parent": unknown, "config": config}),
        ("GetTaskPushNotificationConfig", {"name": f"{unknown}/pushNotificationConfigs/c"}),
        ("ListTaskPushNotificationConfig", {"parent": unknown}),
        ("DeleteTaskPushNotificationConfig", {"name": f"{unknown}/pushNotificationConfigs/c"}),
    ):
        not_found(lambda m=method, f=fields: draft.declared(declared, m, **f))
    follow_up = message("more")
    follow_up.task_id = str(uuid.uuid4())
    not_found(lambda: draft.declared(declared, "SendMessage", request=follow_up))
    not_found(lambda: draft.declared(declared, "SendStreamingMessage", request=follow_up))


def test_v1_draft_list_tasks_refuses_what_tasks_list_refuses(channel, declared, agents):
    """The draft's ListTasks is checked as v0.3's tasks/list is (a2a-v0.3.0-endpoints-zh.md
    3.2.2's error cases): a page size out of range, a bad token, a state the enum lacks."""
    draft = Client(channel, V03_SERVICE, agents.metadata(agents.echo))
    for fields in ({"page_size": 0}, {"page_size": 101}, {"page_token": "x"}, {"status": 42}):
        with pytest.raises(grpc.RpcError) as caught:
            draft.declared(declared, "ListTasks", **fields)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, fields


# --- the transport mapping table -----------------------------------------------------------------


def test_transport_mapping_table_every_method(channel, declared, agents):
    """a2a-transport-mapping.md, "API Structures": service `a2a.A2AService`, each gRPC method
    of the table with the payload it writes (protos/a2a_transport_mapping.proto)."""
    table = Client(channel, TABLE_SERVICE, agents.metadata(agents.echo))
    slow = Client(channel, TABLE_SERVICE, agents.metadata(agents.slow))
    Message_ = declared.message("a2a.v1.Message")
    Part = declared.message("a2a.v1.Part")
    Config = declared.message("a2a.v1.SendMessageConfiguration")

    def message(text: str) -> Any:
        return Message_(message_id=str(uuid.uuid4()), role=1, parts=[Part(text=text)])

    sent = table.declared(declared, "SendMessage", msg=message("hi"))
    task = sent.task
    assert task.status.state == 3 and texts(task.artifacts) == ["hi"]
    events = table.declared(declared, "SendStreamingMessage", msg=message("s"))
    assert events[0].WhichOneof("payload") == "task" and events[-1].status_update.final
    got = table.declared(declared, "GetTask", name=f"tasks/{task.id}")
    assert got.id == task.id and texts(got.artifacts) == ["hi"]
    listed = table.declared(declared, "ListTask")  # payload {}, answer "repeated Task"
    assert {task.id, events[0].task.id} <= {t.id for t in listed.tasks}

    later = Config(blocking=False)
    running = slow.declared(declared, "SendMessage", msg=message("a"), configuration=later).task
    canceled = slow.declared(declared, "CancelTask", name=f"tasks/{running.id}")
    assert canceled.status.state == 5
    running = slow.declared(declared, "SendMessage", msg=message("b"), configuration=later).task
    followed = slow.declared(declared, "TaskSubscription", name=f"tasks/{running.id}")
    assert followed[0].task.id == running.id and followed[-1].status_update.status.state == 3

    # Push configs: the table's `SetTaskPushNotificationRequest { config = 1; }`, the config's
    # resource name naming the task; a config is named `tasks/{id}/pushNotification/{id}`.
    config = declared.message("a2a.v1.TaskPushNotificationConfig")(
        name=f"tasks/{task.id}/pushNotificationConfigs/t1",
        push_notification_config=declared.message("a2a.v1.PushNotificationConfig")(url=HOOK),
    )
    created = table.declared(declared, "CreateTaskPushNotification", config=config)
    assert created.name == config.name and created.push_notification_config.id == "t1"
    got_config = table.declared(
        declared, "GetTaskPushNotification", name=f"tasks/{task.id}/pushNotification/t1"
    )
    assert got_config == created
    got_config = table.declared(declared, "GetTaskPushNotification", name=config.name)
    assert got_config == created
    configs = table.declared(declared, "ListTaskPushNotification", parent=f"tasks/{task.id}")
    assert list(configs.configs) == [created]

    card = table.declared(declared, "GetAgentCard")
    assert card.name == agents.echo.agent.name and card.url

    unknown = f"tasks/{uuid.uuid4()}"
    unknown_config = type(config)(
        name=f"{unknown}/pushNotificationConfigs/c",
        push_notification_config=config.push_notification_config,
    )
    for method, fields in (
        ("GetTask", {"name": unknown}),
        ("CancelTask", {"name": unknown}),
        ("TaskSubscription", {"name": unknown}),
        ("GetTaskPushNotification", {"name": f"{unknown}/pushNotification/c"}),
        ("CreateTaskPushNotification", {"config": unknown_config}),
        ("ListTaskPushNotification", {"parent": unknown}),
    ):
        not_found(lambda m=method, f=fields: table.declared(declared, m, **f))
    follow_up = message("more")
    follow_up.task_id = str(uuid.uuid4())
    not_found(lambda: table.declared(declared, "SendMessage", msg=follow_up))
    not_found(lambda: table.declared(declared, "SendStreamingMessage", msg=follow_up))


def test_a_push_config_request_of_neither_shape_is_an_invalid_argument(channel, agents):
    """CreateTaskPushNotification takes the table's `{config = 1}` or the v0.3 proto's
    `{parent = 1, config_id = 2, config = 3}`; bytes that are neither are refused as such."""
    for service in (TABLE_SERVICE, V03_SERVICE):
        client = Client(channel, service, agents.metadata(agents.echo))
        garbage = pb03.GetTaskRequest(name="t\x00", history_length=-1)  # any other message
        with pytest.raises(grpc.RpcError) as caught:
            client.call("CreateTaskPushNotification", garbage, pb03.TaskPushNotificationConfig)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()


# --- the v0.3 documents --------------------------------------------------------------------------


def test_v03_method_table_every_method(channel, declared, agents):
    """The v0.3 method table, as a2a-v0.3.0-specification.txt 3.5.6 and
    a2a-v0.3.0-endpoints-zh.md 2.1 both give it: these names on `a2a.v1.A2AService` (the
    service of the spec's normative proto, 3.2.2), with that proto's messages; `ListTask`
    takes and answers the endpoint summary's ListTasksParams / ListTasksResult (3.2.2), which
    are the draft's ListTasksRequest / ListTasksResponse field for field."""
    v03 = Client(channel, V03_SERVICE, agents.metadata(agents.echo))
    slow = Client(channel, V03_SERVICE, agents.metadata(agents.slow))

    def message(text: str) -> pb03.Message:
        return pb03.Message(
            message_id=str(uuid.uuid4()), role=pb03.ROLE_USER, content=[pb03.Part(text=text)]
        )

    def send(client: Client, text: str, **config: Any) -> pb03.Task:
        request = pb03.SendMessageRequest(request=message(text))
        if config:
            request.configuration.CopyFrom(pb03.SendMessageConfiguration(**config))
        return client.call("SendMessage", request, pb03.SendMessageResponse).task

    task = send(v03, "hi")
    assert task.status.state == pb03.TASK_STATE_COMPLETED and texts(task.artifacts) == ["hi"]
    events = v03.stream(
        "SendStreamingMessage",
        pb03.SendMessageRequest(request=message("s")),
        pb03.StreamResponse,
    )
    assert events[0].HasField("task") and events[-1].status_update.final
    got = v03.call("GetTask", pb03.GetTaskRequest(name=f"tasks/{task.id}"), pb03.Task)
    assert got.id == task.id
    ListRequest = declared.message("a2a.v1.ListTasksRequest")
    ListResponse = declared.message("a2a.v1.ListTasksResponse")
    listed = v03.call("ListTask", ListRequest(page_size=1), ListResponse)
    assert len(listed.tasks) == 1 and listed.total_size >= 2 and listed.next_page_token
    following = v03.call("ListTask", ListRequest(page_token=listed.next_page_token), ListResponse)
    assert listed.tasks[0].id not in {t.id for t in following.tasks}

    running = send(slow, "a", blocking=False)
    canceled = slow.call(
        "CancelTask", pb03.CancelTaskRequest(name=f"tasks/{running.id}"), pb03.Task
    )
    assert canceled.status.state == pb03.TASK_STATE_CANCELLED
    running = send(slow, "b", blocking=False)
    followed = slow.stream(
        "TaskSubscription",
        pb03.TaskSubscriptionRequest(name=f"tasks/{running.id}"),
        pb03.StreamResponse,
    )
    assert followed[-1].status_update.status.state == pb03.TASK_STATE_COMPLETED

    parent = f"tasks/{task.id}"
    name = f"{parent}/pushNotificationConfigs/z1"
    created = v03.call(
        "CreateTaskPushNotification",
        pb03.CreateTaskPushNotificationConfigRequest(
            parent=parent,
            config_id="z1",
            config=pb03.TaskPushNotificationConfig(
                push_notification_config=pb03.PushNotificationConfig(url=HOOK)
            ),
        ),
        pb03.TaskPushNotificationConfig,
    )
    assert created.name == name
    got_config = v03.call(
        "GetTaskPushNotification",
        pb03.GetTaskPushNotificationConfigRequest(name=name),
        pb03.TaskPushNotificationConfig,
    )
    assert got_config == created
    configs = v03.call(
        "ListTaskPushNotification",
        pb03.ListTaskPushNotificationConfigRequest(parent=parent),
        pb03.ListTaskPushNotificationConfigResponse,
    )
    assert list(configs.configs) == [created]
    deleted = v03.call(
        "DeleteTaskPushNotification",
        pb03.DeleteTaskPushNotificationConfigRequest(name=name),
        empty_pb2.Empty,
    )
    assert deleted == empty_pb2.Empty()
    card = v03.call("GetAgentCard", pb03.GetAgentCardRequest(), pb03.AgentCard)
    assert card.name == agents.echo.agent.name and card.capabilities.streaming

    unknown = f"tasks/{uuid.uuid4()}"
    unknown_name = f"{unknown}/pushNotificationConfigs/c"
    push = pb03.TaskPushNotificationConfig(
        push_notification_config=pb03.PushNotificationConfig(url=HOOK)
    )
    for method, request, answer in (
        ("GetTask", pb03.GetTaskRequest(name=unknown), pb03.Task),
        ("CancelTask", pb03.CancelTaskRequest(name=unknown), pb03.Task),
        (
            "CreateTaskPushNotification",
            pb03.CreateTaskPushNotificationConfigRequest(parent=unknown, config=push),
            pb03.TaskPushNotificationConfig,
        ),
        (
            "GetTaskPushNotification",
            pb03.GetTaskPushNotificationConfigRequest(name=unknown_name),
            pb03.TaskPushNotificationConfig,
        ),
        (
            "ListTaskPushNotification",
            pb03.ListTaskPushNotificationConfigRequest(parent=unknown),
            pb03.ListTaskPushNotificationConfigResponse,
        ),
        (
            "DeleteTaskPushNotification",
            pb03.DeleteTaskPushNotificationConfigRequest(name=unknown_name),
            empty_pb2.Empty,
        ),
    ):
        not_found(lambda m=method, r=request, a=answer: v03.call(m, r, a))
    not_found(
        lambda: v03.stream(
            "TaskSubscription", pb03.TaskSubscriptionRequest(name=unknown), pb03.StreamResponse
        )
    )


def test_v03_normative_proto_every_method(channel, agents):
    """a2a-v0.3.0-specification.txt 3.2.2: the normative proto's `A2AService` (the a2a-sdk's
    v0.3 stubs, unchanged), every method."""
    stub = pb03_grpc.A2AServiceStub(channel)
    metadata = agents.metadata(agents.echo)
    slow_metadata = agents.metadata(agents.slow)

    def call(method: Callable[..., Any], request: Message, md: Any = metadata) -> Any:
        return method(request, metadata=md, timeout=TIMEOUT)

    def message(text: str) -> pb03.Message:
        return pb03.Message(
            message_id=str(uuid.uuid4()), role=pb03.ROLE_USER, content=[pb03.Part(text=text)]
        )

    task = call(stub.SendMessage, pb03.SendMessageRequest(request=message("hi"))).task
    assert task.status.state == pb03.TASK_STATE_COMPLETED
    events = list(call(stub.SendStreamingMessage, pb03.SendMessageRequest(request=message("s"))))
    assert events[-1].status_update.final
    assert call(stub.GetTask, pb03.GetTaskRequest(name=f"tasks/{task.id}")).id == task.id
    later = pb03.SendMessageConfiguration(blocking=False)
    running = call(
        stub.SendMessage,
        pb03.SendMessageRequest(request=message("a"), configuration=later),
        slow_metadata,
    ).task
    canceled = call(
        stub.CancelTask, pb03.CancelTaskRequest(name=f"tasks/{running.id}"), slow_metadata
    )
    assert canceled.status.state == pb03.TASK_STATE_CANCELLED
    running = call(
        stub.SendMessage,
        pb03.SendMessageRequest(request=message("b"), configuration=later),
        slow_metadata,
    ).task
    followed = list(
        call(
            stub.TaskSubscription,
            pb03.TaskSubscriptionRequest(name=f"tasks/{running.id}"),
            slow_metadata,
        )
    )
    assert followed[-1].status_update.status.state == pb03.TASK_STATE_COMPLETED
    parent = f"tasks/{task.id}"
    created = call(
        stub.CreateTaskPushNotificationConfig,
        pb03.CreateTaskPushNotificationConfigRequest(
            parent=parent,
            config_id="n1",
            config=pb03.TaskPushNotificationConfig(
                push_notification_config=pb03.PushNotificationConfig(url=HOOK)
            ),
        ),
    )
    assert created.name == f"{parent}/pushNotificationConfigs/n1"
    assert (
        call(
            stub.GetTaskPushNotificationConfig,
            pb03.GetTaskPushNotificationConfigRequest(name=created.name),
        )
        == created
    )
    listed = call(
        stub.ListTaskPushNotificationConfig,
        pb03.ListTaskPushNotificationConfigRequest(parent=parent),
    )
    assert list(listed.configs) == [created]
    assert (
        call(
            stub.DeleteTaskPushNotificationConfig,
            pb03.DeleteTaskPushNotificationConfigRequest(name=created.name),
        )
        == empty_pb2.Empty()
    )
    card = call(stub.GetAgentCard, pb03.GetAgentCardRequest())
    assert card.name == agents.echo.agent.name

    unknown = f"tasks/{uuid.uuid4()}"
    for method, request in (
        (stub.GetTask, pb03.GetTaskRequest(name=unknown)),
        (stub.CancelTask, pb03.CancelTaskRequest(name=unknown)),
        (stub.TaskSubscription, pb03.TaskSubscriptionRequest(name=unknown)),
        (
            stub.GetTaskPushNotificationConfig,
            pb03.GetTaskPushNotificationConfigRequest(name=f"{unknown}/pushNotificationConfigs/c"),
        ),
        (
            stub.ListTaskPushNotificationConfig,
            pb03.ListTaskPushNotificationConfigRequest(parent=unknown),
        ),
    ):
        not_found(lambda m=method, r=request: call(m, r))


# --- the v1.0.1 specification and proto ----------------------------------------------------------


def test_v101_proto_every_method(channel, agents):
    """a2a-v1.0.1.proto `lf.a2a.v1.A2AService` (specification section 10), every method, the
    agent named by the request's `tenant`."""
    stub = pb10_grpc.A2AServiceStub(channel)
    metadata = [("x-api-key", agents.echo.key)]
    echo, slow = agents.echo.tenant_value, agents.slow.tenant_value

    def call(method: Callable[..., Any], request: Message) -> Any:
        return method(request, metadata=metadata, timeout=TIMEOUT)

    def send(tenant: str, text: str, **config: Any) -> pb10.Task:
        message = pb10.Message(
            message_id=str(uuid.uuid4()), role=pb10.ROLE_USER, parts=[pb10.Part(text=text)]
        )
        request = pb10.SendMessageRequest(
            tenant=tenant, message=message, configuration=pb10.SendMessageConfiguration(**config)
        )
        return call(stub.SendMessage, request).task

    task = send(echo, "hi")
    assert task.status.state == pb10.TASK_STATE_COMPLETED and texts(task.artifacts) == ["hi"]
    message = pb10.Message(
        message_id=str(uuid.uuid4()), role=pb10.ROLE_USER, parts=[pb10.Part(text="s")]
    )
    events = list(
        call(stub.SendStreamingMessage, pb10.SendMessageRequest(tenant=echo, message=message))
    )
    assert events[0].HasField("task")
    assert events[-1].status_update.status.state == pb10.TASK_STATE_COMPLETED
    assert call(stub.GetTask, pb10.GetTaskRequest(tenant=echo, id=task.id)).id == task.id
    listed = call(stub.ListTasks, pb10.ListTasksRequest(tenant=echo))
    assert task.id in {t.id for t in listed.tasks}
    running = send(slow, "a", return_immediately=True)
    canceled = call(stub.CancelTask, pb10.CancelTaskRequest(tenant=slow, id=running.id))
    assert canceled.status.state == pb10.TASK_STATE_CANCELED
    running = send(slow, "b", return_immediately=True)
    followed = list(
        call(stub.SubscribeToTask, pb10.SubscribeToTaskRequest(tenant=slow, id=running.id))
    )
    assert followed[-1].status_update.status.state == pb10.TASK_STATE_COMPLETED
    created = call(
        stub.CreateTaskPushNotificationConfig,
        pb10.TaskPushNotificationConfig(tenant=echo, task_id=task.id, id="v1", url=HOOK),
    )
    assert created.id == "v1" and created.task_id == task.id and created.url == HOOK
    got = call(
        stub.GetTaskPushNotificationConfig,
        pb10.GetTaskPushNotificationConfigRequest(tenant=echo, task_id=task.id, id="v1"),
    )
    assert got.url == HOOK
    configs = call(
        stub.ListTaskPushNotificationConfigs,
        pb10.ListTaskPushNotificationConfigsRequest(tenant=echo, task_id=task.id),
    )
    assert [c.id for c in configs.configs] == ["v1"]
    assert (
        call(
            stub.DeleteTaskPushNotificationConfig,
            pb10.DeleteTaskPushNotificationConfigRequest(tenant=echo, task_id=task.id, id="v1"),
        )
        == empty_pb2.Empty()
    )
    card = call(stub.GetExtendedAgentCard, pb10.GetExtendedAgentCardRequest(tenant=echo))
    assert card.name == agents.echo.agent.name and card.supported_interfaces

    unknown = str(uuid.uuid4())
    for method, request in (
        (stub.GetTask, pb10.GetTaskRequest(tenant=echo, id=unknown)),
        (stub.CancelTask, pb10.CancelTaskRequest(tenant=echo, id=unknown)),
        (stub.SubscribeToTask, pb10.SubscribeToTaskRequest(tenant=echo, id=unknown)),
        (
            stub.CreateTaskPushNotificationConfig,
            pb10.TaskPushNotificationConfig(tenant=echo, task_id=unknown, url=HOOK),
        ),
        (
            stub.GetTaskPushNotificationConfig,
            pb10.GetTaskPushNotificationConfigRequest(tenant=echo, task_id=unknown, id="c"),
        ),
        (
            stub.ListTaskPushNotificationConfigs,
            pb10.ListTaskPushNotificationConfigsRequest(tenant=echo, task_id=unknown),
        ),
        (
            stub.DeleteTaskPushNotificationConfig,
            pb10.DeleteTaskPushNotificationConfigRequest(tenant=echo, task_id=unknown, id="c"),
        ),
    ):
        not_found(lambda m=method, r=request: call(m, r))


def test_the_table_service_speaks_v03_and_says_so(channel, agents):
    """`a2a.A2AService` is the v0.3-era service: an `A2A-Version: 1.0` call is refused with
    the name it was called by and where 1.0 is served."""
    metadata = [*agents.metadata(agents.echo), ("a2a-version", "1.0")]
    client = Client(channel, TABLE_SERVICE, metadata)
    with pytest.raises(grpc.RpcError) as caught:
        client.call("GetAgentCard", pb03.GetAgentCardRequest(), pb03.AgentCard)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    details = caught.value.details() or ""
    assert TABLE_SERVICE in details and V10_SERVICE in details, details
