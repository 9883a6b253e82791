"""Every list answers a bounded page, on every binding and in every dialect, against the live
platform: ListTasks (v1.0 JSON-RPC, REST and gRPC `lf.a2a.v1.A2AService`), tasks/list and
GET v1/tasks (v0.3), the v0.3 gRPC service's ListTasks (the v1 draft's, paged) and the
transport mapping table's ListTask on `a2a.A2AService` (payload `{}`: one page), and the push
config lists.

A page holds at most pageSize items (50 tasks, 100 configs when none is given) and at most
tasks_app.selectors.LIST_PAGE_MAX_BYTES, so that a gRPC client with the default 4 MiB receive
limit reads it; the next page token goes on from where the page ended. The tasks here are large
enough that one page of all of them, as the platform answered before the bound (the mapping
table's ListTask answered 7.4 MB), would pass 4 MiB; the tests show it. Push configs given
large secrets list small, since no answer carries a config's secrets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2 as pb10
from a2a.types import a2a_pb2_grpc as pb10_grpc

from . import test_spec_grpc as spec
from .helpers import Target, error_of, message, result_of, rpc, rpc_send
from .test_spec_grpc import TABLE_SERVICE, V03_SERVICE, Client, Declared

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

GRPC_DEFAULT_RECEIVE = 4 * 1024 * 1024  # grpc's max_receive_message_length when none is set
BIG = 200_000  # characters in each large message or push token
TIMEOUT = 60
HOOK = "http://127.0.0.1:9/hook"  # loopback: the tests' SSRF allowlist lets it through
V03_HEADERS = {"A2A-Version": "0.3"}


@dataclass(frozen=True)
class Page:
    """One answer of a list: the ids in it, the token it gave, its size on the wire, and the
    page size it reports (None where the dialect has no such field)."""

    ids: list[str]
    token: str
    size: int
    page_size: int | None = None


Lister = Callable[[str], Page]  # a page token ("" for the first page) -> that page


@pytest.fixture
def channel(live_platform: Any) -> Iterator[grpc.Channel]:
    """A channel with grpc's default options: it refuses answers over 4 MiB."""
    with grpc.insecure_channel(live_platform.grpc_address) as ch:
        yield ch


# The documents' protos as the gRPC spec tests declare them, compiled once a session.
documents = spec.declared


@pytest.fixture
def echo(make_target: Callable[..., Target]) -> Target:
    return make_target("echo", push_notifications=True)


def send_tasks(http: httpx.Client, target: Target, count: int, size: int = 0) -> list[str]:
    """`count` completed tasks, each sent a message of `size` characters (echo answers with as
    much again, as its status message, and an artifact); their ids, newest first."""
    ids = []
    for n in range(count):
        task = rpc_send(http, target, f"{n:03d} " + "x" * size)["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
        ids.append(task["id"])
    return ids[::-1]


def walk(lister: Lister, *, most: int) -> list[Page]:
    """Every page of a list, from the first until one gives no token; each holds at most
    `most` items and fits gRPC's default receive limit."""
    pages = [lister("")]
    while pages[-1].token:
        assert len(pages) <= 100, "the list does not end"
        pages.append(lister(pages[-1].token))
    for page in pages:
        assert page.ids and len(page.ids) <= most, page.ids
        assert page.size < GRPC_DEFAULT_RECEIVE, page.size
    return pages


def ids_of(pages: list[Page]) -> list[str]:
    return [task_id for page in pages for task_id in page.ids]


# --- one lister per binding and dialect --------------------------------------------------------


def grpc_v10(channel: grpc.Channel, target: Target, **fields: Any) -> Lister:
    stub = pb10_grpc.A2AServiceStub(channel)

    def page(token: str) -> Page:
        request = pb10.ListTasksRequest(tenant=target.tenant_value, page_token=token, **fields)
        answer = stub.ListTasks(request, metadata=[("x-api-key", target.key)], timeout=TIMEOUT)
        ids = [task.id for task in answer.tasks]
        return Page(ids, answer.next_page_token, answer.ByteSize(), answer.page_size)

    return page


def v03_client(channel: grpc.Channel, service: str, target: Target) -> Client:
    return Client(channel, service, [("x-api-key", target.key), ("a2a-agent", target.tenant_value)])


def grpc_draft(channel: grpc.Channel, target: Target, documents: Declared, **fields: Any) -> Lister:
    """The v1 draft's ListTasks on a2a.v1.A2AService, as the draft declares it (the v0.3
    method tables' ListTask takes and answers the same messages)."""
    client = v03_client(channel, V03_SERVICE, target)

    def page(token: str) -> Page:
        answer = client.declared(documents, "ListTasks", page_token=token, **fields)
        ids = [task.id for task in answer.tasks]
        return Page(ids, answer.next_page_token, answer.ByteSize(), answer.page_size)

    return page


def grpc_table(channel: grpc.Channel, target: Target, documents: Declared) -> Page:
    """The transport mapping table's ListTask on a2a.A2AService: payload `{}`, answer
    `repeated Task`. It cannot ask for a page: it gets the first."""
    answer = v03_client(channel, TABLE_SERVICE, target).declared(documents, "ListTask")
    return Page([task.id for task in answer.tasks], "", answer.ByteSize())


def jsonrpc(http: httpx.Client, target: Target, method: str, headers: dict[str, str]) -> Lister:
    def page(token: str) -> Page:
        response = rpc(http, target, method, {"pageToken": token} if token else {}, headers=headers)
        result = result_of(response)
        ids = [task["id"] for task in result["tasks"]]
        return Page(ids, result["nextPageToken"], len(response.content), result["pageSize"])

    return page


def rest(http: httpx.Client, target: Target, path: str, **query: str) -> Lister:
    def page(token: str) -> Page:
        params = {**query, **({"pageToken": token} if token else {})}
        response = http.get(f"{target.url}{path}", params=params, headers={"X-API-Key": target.key})
        assert response.status_code == 200, response.text
        result = response.json()
        if isinstance(result, list):  # the mapping table's [Task]: one page
            return Page([task["id"] for task in result], "", len(response.content))
        ids = [task["id"] for task in result["tasks"]]
        return Page(ids, result["nextPageToken"], len(response.content), result["pageSize"])

    return page


def paged_listers(
    http: httpx.Client, channel: grpc.Channel, target: Target, documents: Declared
) -> dict[str, Lister]:
    """Every list of tasks that pages, by binding and dialect."""
    return {
        "gRPC v1.0 ListTasks": grpc_v10(channel, target),
        "gRPC v0.3 (draft) ListTasks": grpc_draft(channel, target, documents),
        "JSON-RPC v1.0 ListTasks": jsonrpc(http, target, "ListTasks", {"A2A-Version": "1.0"}),
        "JSON-RPC v0.3 tasks/list": jsonrpc(http, target, "tasks/list", V03_HEADERS),
        "REST v1.0 GET tasks": rest(http, target, "tasks"),
        "REST v0.3 GET v1/tasks": rest(http, target, "v1/tasks"),
    }


# --- tasks -------------------------------------------------------------------------------------


def test_large_tasks_are_listed_in_pages_under_4_mib_on_every_binding(
    http, channel, echo, documents
):
    # given 25 tasks of about 400 kB each (a message and its echo; artifacts are not listed
    # unless asked for): one page of them all would be about 10 MB
    expected = send_tasks(http, echo, 25, size=BIG)

    # when each binding lists them without a page size
    whole_sizes = []
    for name, lister in paged_listers(http, channel, echo, documents).items():
        pages = walk(lister, most=24)
        # then every page fits under 4 MiB, the next page token goes on from where the page
        # ended, and every task comes once, newest first
        assert ids_of(pages) == expected, name
        assert len(pages) > 1, name
        assert all(page.page_size == 50 for page in pages), name  # the default page size
        if name == "gRPC v1.0 ListTasks":
            whole_sizes = [page.size for page in pages]

    # (before the bound, all 25 came in one answer, which a default gRPC client refuses)
    assert sum(whole_sizes) > GRPC_DEFAULT_RECEIVE

    # The mapping table's ListTask, which has no page fields, answers the first page.
    first = grpc_table(channel, echo, documents)
    assert first.size < GRPC_DEFAULT_RECEIVE
    assert 0 < len(first.ids) < len(expected) and first.ids == expected[: len(first.ids)]
    # ... as does REST v0.3 in the mapping table's spelling (`[Task]`).
    (mapped,) = walk(rest(http, echo, "v1/tasks", spelling="mapping"), most=24)
    assert mapped.ids == expected[: len(mapped.ids)]


def test_the_v03_service_bounds_its_pages_in_its_own_encoding(http, channel, echo, documents):
    """A data part that is not an object takes four times the room in the v0.3 protos (it is
    wrapped as `{"value": ...}`, with a metadata flag) as in v1.0's: the v0.3 service measures
    its pages as it sends them, so a page that fits in v1.0 bytes is cut again for v0.3."""
    # given 10 tasks each sent 10,000 numbers as data parts: about 1.3 MB in all as v1.0
    # protos, over 5 MB as v0.3's
    parts = [{"data": n} for n in range(10_000)]
    expected = []
    for _ in range(10):
        params = {"message": message("numbers", parts=parts)}
        expected.append(result_of(rpc(http, echo, "SendMessage", params))["task"]["id"])
    expected.reverse()
    v10_pages = walk(grpc_v10(channel, echo), most=10)
    assert [len(page.ids) for page in v10_pages] == [10]  # one v1.0 page holds them all

    # when the v0.3 service lists them: pages under 4 MiB, every task once
    pages = walk(grpc_draft(channel, echo, documents), most=9)
    assert ids_of(pages) == expected
    assert sum(page.size for page in pages) > GRPC_DEFAULT_RECEIVE
    first = grpc_table(channel, echo, documents)
    assert first.ids == pages[0].ids and first.size < GRPC_DEFAULT_RECEIVE


def test_listed_tasks_keep_their_whole_history_and_artifacts_when_asked(http, channel, echo):
    """A page ends between tasks: the tasks in it are whole (the message each was sent, in its
    history, and its artifact, which includeArtifacts asks for)."""
    expected = send_tasks(http, echo, 12, size=BIG)
    stub = pb10_grpc.A2AServiceStub(channel)
    seen: list[str] = []
    token = ""
    while True:
        request = pb10.ListTasksRequest(
            tenant=echo.tenant_value, page_token=token, include_artifacts=True
        )
        answer = stub.ListTasks(request, metadata=[("x-api-key", echo.key)], timeout=TIMEOUT)
        assert answer.ByteSize() < GRPC_DEFAULT_RECEIVE and len(answer.tasks) < len(expected)
        for task in answer.tasks:
            (sent,) = [m for m in task.history if m.role == pb10.Role.ROLE_USER]
            assert len(sent.parts[0].text) > BIG
            assert len(task.artifacts) == 1 and len(task.artifacts[0].parts[0].text) > BIG
        seen += [task.id for task in answer.tasks]
        token = answer.next_page_token
        if not token:
            break
    assert seen == expected


def test_a_list_without_a_page_size_answers_the_default_page_of_50(http, channel, echo, documents):
    # given 51 small tasks
    expected = send_tasks(http, echo, 51)

    for name, lister in paged_listers(http, channel, echo, documents).items():
        # when listed without a page size: 50 tasks and a token, then the last one
        pages = walk(lister, most=50)
        assert [len(page.ids) for page in pages] == [50, 1], name
        assert ids_of(pages) == expected, name
        assert pages[0].page_size == 50, name

    # The lists that cannot page (the mapping table's) answer the same first page.
    assert grpc_table(channel, echo, documents).ids == expected[:50]
    assert rest(http, echo, "v1/tasks", spelling="mapping")("").ids == expected[:50]


def test_a_page_size_out_of_range_is_refused_naming_the_range(http, channel, echo, documents):
    """The specification's example refuses pageSize 150 ("Must be between 1 and 100
    inclusive, got 150") rather than clamping it: every binding says so in its own format."""
    words = ("between 1 and 100 inclusive", "150")
    for method, headers in (("ListTasks", {"A2A-Version": "1.0"}), ("tasks/list", V03_HEADERS)):
        error_of(rpc(http, echo, method, {"pageSize": 150}, headers=headers), -32602, *words)
    for path in ("tasks", "v1/tasks"):
        response = http.get(
            f"{echo.url}{path}", params={"pageSize": "150"}, headers={"X-API-Key": echo.key}
        )
        assert response.status_code == 400, response.text
        assert all(w in response.json()["error"]["message"] for w in words), response.text
    for call in (
        lambda: grpc_v10(channel, echo, page_size=150)(""),
        lambda: grpc_draft(channel, echo, documents, page_size=150)(""),
    ):
        with pytest.raises(grpc.RpcError) as caught:
            call()
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert all(w in caught.value.details() for w in words), caught.value.details()


# --- push configs ------------------------------------------------------------------------------


def test_push_configs_with_large_secrets_list_whole_in_one_small_page(http, channel, echo):
    # given a task with 25 push configs, each with a token of 200 kB: 5 MB in all, none of which
    # a list answers (secrets are write-only), so that before they were, its pages ended early
    task_id = rpc_send(http, echo, "hi")["task"]["id"]
    stub = pb10_grpc.A2AServiceStub(channel)
    metadata = [("x-api-key", echo.key)]
    config_ids = [f"c{n:02d}" for n in range(25)]
    for config_id in config_ids:
        config = pb10.TaskPushNotificationConfig(
            tenant=echo.tenant_value, task_id=task_id, id=config_id, url=HOOK, token="t" * BIG
        )
        stub.CreateTaskPushNotificationConfig(config, metadata=metadata, timeout=TIMEOUT)

    def grpc_page(token: str) -> Page:
        request = pb10.ListTaskPushNotificationConfigsRequest(
            tenant=echo.tenant_value, task_id=task_id, page_token=token
        )
        answer = stub.ListTaskPushNotificationConfigs(request, metadata=metadata, timeout=TIMEOUT)
        ids = [config.id for config in answer.configs]
        return Page(ids, answer.next_page_token, answer.ByteSize())

    def jsonrpc_page(token: str) -> Page:
        params = {"taskId": task_id, **({"pageToken": token} if token else {})}
        response = rpc(http, echo, "ListTaskPushNotificationConfigs", params)
        result = result_of(response)
        ids = [config["id"] for config in result["configs"]]
        return Page(ids, result.get("nextPageToken", ""), len(response.content))

    def rest_page(token: str) -> Page:
        response = http.get(
            f"{echo.url}tasks/{task_id}/pushNotificationConfigs",
            params={"pageToken": token} if token else {},
            headers={"X-API-Key": echo.key},
        )
        assert response.status_code == 200, response.text
        result = response.json()
        ids = [config["id"] for config in result["configs"]]
        return Page(ids, result.get("nextPageToken", ""), len(response.content))

    # when each binding lists them without a page size (100 configs would fit the page size)
    for name, lister in {"gRPC": grpc_page, "JSON-RPC": jsonrpc_page, "REST": rest_page}.items():
        (page,) = walk(lister, most=25)
        # then one page holds them all, a few kB: ids, urls and no token
        assert page.ids == config_ids, name
        assert page.size < 16 * 1024, (name, page.size)

    # v0.3's tasks/pushNotificationConfig/list answers a bare array, and it is all of them.
    response = rpc(http, echo, "tasks/pushNotificationConfig/list", {"id": task_id}, headers={})
    listed = result_of(response)
    assert [c["pushNotificationConfig"]["id"] for c in listed] == config_ids
    assert len(response.content) < 16 * 1024 and b"t" * 100 not in response.content
