"""Official a2a-sdk clients for the end-to-end tests: v1.0 and the v0.3 compat clients, over
JSON-RPC, HTTP+JSON and gRPC."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import grpc.aio
import httpx
from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.interceptors import AfterArgs, BeforeArgs, ClientCallInterceptor
from a2a.types import AgentCard, Message, Part, Role, SendMessageRequest, StreamResponse
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0

AGENT_METADATA = "a2a-agent"


class ServiceParameters(ClientCallInterceptor):
    """Adds service parameters (gRPC metadata) to every call of a client, under those the call
    passes in its own `ClientCallContext`. gRPC has no httpx client to carry the API key, and
    the SDK's v0.3 gRPC transport has no `tenant`: the agent is named in `a2a-agent`."""

    def __init__(self, parameters: dict[str, str]) -> None:
        self.parameters = parameters

    async def before(self, args: BeforeArgs) -> None:
        context = args.context or ClientCallContext()
        context.service_parameters = {**self.parameters, **(context.service_parameters or {})}
        args.context = context

    async def after(self, args: AfterArgs) -> None:
        pass


def grpc_channel(address: str, via: str | None = None) -> grpc.aio.Channel:
    """The SDK's `grpc_channel_factory`: a plaintext channel to the card's GRPC address, or to
    `via` (a front such as HAProxy listening elsewhere here) with the card's address as the
    call's authority; a name under `.localhost` is reached at 127.0.0.1, keeping the name as
    the authority."""
    host, _, port = address.rpartition(":")
    if via or host.endswith(".localhost"):
        return grpc.aio.insecure_channel(
            via or f"127.0.0.1:{port}", options=[("grpc.default_authority", address)]
        )
    return grpc.aio.insecure_channel(address)


class Loopback(httpx.AsyncHTTPTransport):
    """Names under `.localhost` (RFC 6761) reach 127.0.0.1 with their Host header kept, where
    the machine's resolver does not map them (it need not)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host.endswith(".localhost"):
            request.headers["Host"] = request.url.netloc.decode("ascii")
            request.url = request.url.copy_with(host="127.0.0.1")
        return await super().handle_async_request(request)


def grpc_tenant(card: AgentCard) -> str:
    """The agent's `<tenant>/<agent>` on the gRPC sidecar: the `tenant` its card's GRPC 1.0
    interface carries (v0.3 clients send it as `a2a-agent` metadata)."""
    tenants = [
        i.tenant
        for i in card.supported_interfaces
        if i.protocol_binding == GRPC and i.protocol_version == PROTOCOL_VERSION_1_0
    ]
    assert len(tenants) == 1 and tenants[0], f"the card has no GRPC 1.0 tenant: {card}"
    return tenants[0]


@asynccontextmanager
async def sdk_client(
    agent_url: str,
    *,
    key: str | None = None,
    version: str = PROTOCOL_VERSION_1_0,
    polling: bool = False,
    streaming: bool = False,
    binding: str = "JSONRPC",
    metadata: dict[str, str] | None = None,
    name_agent: bool = True,
    grpc_via: str | None = None,
    token: str | None = None,
) -> AsyncIterator[Client]:
    """A client built by the SDK's own factory from the agent's served card, limited to one
    protocol version and one binding (`JSONRPC`, `HTTP+JSON` or `GRPC`).

    gRPC clients send the key as `x-api-key` metadata and, in v0.3, the agent as `a2a-agent`
    metadata (v1.0 clients copy the card's `tenant` into each request themselves). `metadata`
    is more gRPC metadata for every call (it overrides those two); a call's own
    `ClientCallContext.service_parameters` override all of them. `name_agent=False`: a v0.3
    gRPC client sends no `a2a-agent` (it reaches the agent by the card's address alone);
    `grpc_via`: gRPC connects there, the card's address kept as the authority; `token`: a
    bearer token sent as `Authorization: Bearer` (header or metadata) instead of a key.
    """
    headers = credential_headers(key, token)
    async with httpx.AsyncClient(headers=headers, timeout=60, transport=Loopback()) as http:
        card = await A2ACardResolver(http, agent_url).get_agent_card()
        only = AgentCard()
        only.CopyFrom(card)
        del only.supported_interfaces[:]
        only.supported_interfaces.extend(
            i
            for i in card.supported_interfaces
            if i.protocol_version == version and i.protocol_binding == binding
        )
        assert only.supported_interfaces, f"the card has no {binding} {version} interface"
        config = ClientConfig(
            httpx_client=http,
            streaming=streaming,
            polling=polling,
            supported_protocol_bindings=[binding],
            grpc_channel_factory=(
                (lambda address: grpc_channel(address, grpc_via)) if binding == GRPC else None
            ),
        )
        interceptors: list[ClientCallInterceptor] = []
        if binding == GRPC:
            parameters = {k.lower(): v for k, v in credential_headers(key, token).items()}
            if version == PROTOCOL_VERSION_0_3 and name_agent:
                parameters[AGENT_METADATA] = grpc_tenant(card)
            parameters.update(metadata or {})
            interceptors.append(ServiceParameters(parameters))
        else:
            assert metadata is None, "metadata is for gRPC clients"
        client = ClientFactory(config).create(only, interceptors)
        try:
            yield client
        finally:
            await client.close()


def credential_headers(key: str | None, token: str | None = None) -> dict[str, str]:
    """The headers (or gRPC metadata, lower-cased) that carry a key or a bearer token."""
    if token:
        return {"Authorization": f"Bearer {token}"}
    return {"X-API-Key": key} if key else {}


def user_message(text: str, message_id: str, **fields: Any) -> Message:
    return Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)], **fields)


async def send(client: Client, message: Message, **configuration: Any) -> StreamResponse:
    request = SendMessageRequest(message=message)
    for name, value in configuration.items():
        setattr(request.configuration, name, value)
    responses = [r async for r in client.send_message(request)]
    assert len(responses) == 1
    return responses[0]


JSONRPC = "JSONRPC"
HTTP_JSON = "HTTP+JSON"
GRPC = "GRPC"
V1_0 = PROTOCOL_VERSION_1_0
V0_3 = PROTOCOL_VERSION_0_3
