"""Official a2a-sdk clients for the end-to-end tests: v1.0 JSON-RPC and the v0.3 compat client."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import AgentCard, Message, Part, Role, SendMessageRequest, StreamResponse
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0


@asynccontextmanager
async def sdk_client(
    agent_url: str,
    *,
    key: str | None = None,
    version: str = PROTOCOL_VERSION_1_0,
    polling: bool = False,
    streaming: bool = False,
    binding: str = "JSONRPC",
) -> AsyncIterator[Client]:
    """A client built by the SDK's own factory from the agent's served card, limited to one
    protocol version and one binding (`JSONRPC` or `HTTP+JSON`)."""
    headers = {"X-API-Key": key} if key else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
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
        )
        client = ClientFactory(config).create(only)
        try:
            yield client
        finally:
            await client.close()


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
V1_0 = PROTOCOL_VERSION_1_0
V0_3 = PROTOCOL_VERSION_0_3


def raw_send(text: str, *, return_immediately: bool = False, request_id: int = 1) -> dict[str, Any]:
    """A v1.0 SendMessage JSON-RPC request, for tests that speak raw HTTP."""
    params: dict[str, Any] = {
        "message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    }
    if return_immediately:
        params["configuration"] = {"returnImmediately": True}
    return {"jsonrpc": "2.0", "id": request_id, "method": "SendMessage", "params": params}
