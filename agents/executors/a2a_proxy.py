"""The `a2a-proxy` executor: a front for an A2A agent hosted elsewhere.

Each run fetches the upstream's card from `card_url` and talks to it with the a2a-sdk client
(`ClientFactory`) on the binding the config prefers, so a tenant can put an outside agent behind
the platform's keys, task log, streams, push and bindings without writing code.

Credentials: the `token` secret goes as `Authorization: Bearer <token>`, the `api_key` secret in
the `api_key_header` header, on every HTTP request (the card too) and as gRPC metadata
(`authorization`, and the header's name lower-cased).

The SSRF guard (policy AGENT) sees every connection: HTTP goes through `outbound.http_client`,
which checks each address it connects to. gRPC channels do not go through httpx: the card's gRPC
address is checked with the guard before the first call (the channel then resolves the name
itself, so a name whose DNS answer changes in between is not caught there). TLS or plaintext for
gRPC: an address with a scheme says it (`grpcs://` or `https://`: TLS; `grpc://` or `http://`:
plaintext); a bare `host:port` (what the platform's own cards advertise) is reached as the card
was, over TLS when `card_url` is https and in plaintext when it is http.

What is kept between the runs of a task (`PlatformRun.state`): the upstream task's id and
context id, and which of our messages went upstream. A follow-up to our task (after the upstream
asked for input) goes to the same upstream task; a new task in a conversation already forwarded
reuses the upstream context id (`context_state`); a run that starts again on a message already
forwarded (its worker stopped) follows the upstream task instead of sending it twice.

The run: our task goes to working, the user's message goes upstream (parts as they are, under the
caller's message id suffixed with a digest of our task's: `outgoing_message`). Streaming (when the
config and the card both allow it) relays the stream; otherwise a first message is sent with
`returnImmediately` (the upstream task's id is known at once, so a cancel reaches it) and the
task is polled with GetTask; a follow-up is a blocking send. A stream that ends before the
upstream task settles is followed with GetTask and SubscribeToTask.

Mapping (`Relay`): an upstream Task becomes its status and its artifacts (those our task does
not hold already); status updates keep state, message and metadata; artifact updates keep
append/lastChunk; a direct Message reply becomes our agent's reply (our task completes with it).
Every event gets our task and context ids; upstream message ids are mapped to ids derived from
our task's (unique, and the same every time the same message is seen). The upstream's terminal
or interrupted state becomes ours. An upstream error fails our task with one sentence that names
the upstream and what it answered (HTTP status, JSON-RPC or gRPC error, refused address,
timeout).

Cancel: the runtime cancels `execute()` (its upstream stream and connections are closed on the
way out), then `cancel()` cancels the upstream task and ends ours canceled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

import grpc
import grpc.aio
import httpx
from a2a.client import (
    A2ACardResolver,
    A2AClientError,
    A2AClientTimeoutError,
    AgentCardResolutionError,
    Client,
    ClientCallContext,
    ClientConfig,
    ClientFactory,
)
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import Event, EventQueue
from a2a.types import (
    AgentCard,
    Artifact,
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import (
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from pydantic import BaseModel, ConfigDict, Field, field_validator

from a2a_platform.ssrf import AGENT, UnsafeUrl, url_check
from tasks_app.artifacts import artifact_joined, artifact_parts_append

from .outbound import ConnectionTestFailed, http_client, in_chain, url_problem
from .platform import platform_run

logger = logging.getLogger(__name__)

# `token` goes as "Authorization: Bearer <token>"; `api_key` in the header api_key_header names.
SECRET_NAMES = ("token", "api_key")

# The bindings the SDK's client speaks; with binding "auto" the card's own order picks one.
BINDINGS = (
    TransportProtocol.JSONRPC.value,
    TransportProtocol.HTTP_JSON.value,
    TransportProtocol.GRPC.value,
)
TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
SETTLED = TERMINAL | {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
# How a gRPC upstream refuses a credential ("test connection" names it).
REFUSED_GRPC = frozenset({grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED})
# Polling an upstream that does not stream: the first look soon, then less and less often.
POLL_FIRST_SECONDS = 0.1
POLL_MAX_SECONDS = 2.0
# How much of the caller's message id starts the id of the message sent upstream.
MESSAGE_ID_PREFIX = 100
# Message ids on our side are derived from our task's id and the upstream's message id.
_IDS = uuid.UUID("8d3f0b7e-5a8e-4c1b-9a53-2f4f0c6d1e27")


class ProxyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    card_url: str = Field(
        description="The upstream agent's card, e.g. "
        "https://agents.example.com/.well-known/agent-card.json.",
        min_length=1,
        max_length=2000,
    )
    binding: Literal["auto", "JSONRPC", "HTTP+JSON", "GRPC"] = Field(
        default="auto",
        description="The upstream binding to use: auto takes the card's preferred one; another "
        "is used when the card offers it, else the card's preferred one.",
    )
    api_key_header: str = Field(
        default="X-API-Key",
        min_length=1,
        max_length=100,
        description="The header that carries the api_key secret (the token secret goes as "
        "Authorization: Bearer).",
    )
    streaming: bool = Field(
        default=True, description="Stream from the upstream when its card says it can."
    )
    timeout_seconds: float = Field(
        default=60,
        gt=0,
        le=3600,
        description="Connecting, and waiting for each upstream event, ends after this long.",
    )

    @field_validator("api_key_header")
    @classmethod
    def _header_name(cls, value: str) -> str:
        if not all(c.isascii() and (c.isalnum() or c == "-") for c in value):
            raise ValueError("use a header name of letters, digits and hyphens, e.g. X-API-Key")
        return value


def save_check(config: ProxyConfig) -> dict[str, str]:
    problem = url_problem(config.card_url, "card_url")
    return {"card_url": problem} if problem else {}


def build(config: ProxyConfig, secrets: Mapping[str, str]) -> AgentExecutor:
    return ProxyExecutor(config, secrets)


async def connection_test(
    config: ProxyConfig, secrets: Mapping[str, str], *, agent_path: str = ""
) -> str:
    """Fetch the card (who answered, over which bindings, whether it streams); then, when a
    credential is set, make one call that needs it and changes nothing, with the SDK client as
    a run makes its calls: GetExtendedAgentCard when the card offers an extended card, else
    GetTask of a made-up task, whose TaskNotFound says the credential got through. A 401 or 403
    (gRPC UNAUTHENTICATED or PERMISSION_DENIED) fails the test, naming the credential refused.
    Without a credential only the public card is checked, and the answer says so. (Nothing is
    signed: `agent_path` is not needed.)"""
    sent = credentials_named(config, secrets)
    who = f"The upstream agent at {config.card_url}"
    try:
        async with http_client(
            timeout=config.timeout_seconds, headers=credential_headers(config, secrets)
        ) as http:
            card = await card_fetch(config, http)
        offered = list(dict.fromkeys(i.protocol_binding for i in card.supported_interfaces))
        if not set(offered) & set(BINDINGS):
            raise ConnectionTestFailed(
                f"{card_label(card)} offers no binding this proxy speaks ({', '.join(BINDINGS)}); "
                f"its card lists {', '.join(offered) or 'none'}."
            )
        streams = "streams" if card.capabilities.streaming else "does not stream"
        version = f" {card.version}" if card.version else ""
        reached = f"Reached {card.name or 'the agent'}{version}: {', '.join(offered)}; {streams}."
        if not sent:
            # An empty requirement among them allows anonymous calls, as in OpenAPI.
            required = card.security_requirements
            needed = bool(required) and all(r.schemes for r in required)
            asks = " (its card says calls need one)" if needed else ""
            return (
                f"{reached} No credential is set (token, api_key), so only its public card was "
                f"checked{asks}."
            )
        who = card_label(card)
        async with upstream_connect(config, secrets, card) as upstream:
            accepted = await credential_try(upstream)
    except UpstreamFailed as exc:
        reason = credential_refusal(exc, who=who, sent=sent) or str(exc)
        raise ConnectionTestFailed(scrubbed(reason, secrets)) from None
    return f"{reached} It accepted {sent}: {accepted}."


def credentials_named(config: ProxyConfig, secrets: Mapping[str, str]) -> str:
    """The credentials a call carries, as the tenant configured them ('' for none)."""
    named = []
    if secrets.get("token"):
        named.append("the token (Authorization: Bearer)")
    if secrets.get("api_key"):
        named.append(f"the API key ({config.api_key_header})")
    return " and ".join(named)


async def credential_try(upstream: Upstream) -> str:
    """One call that needs the credential and has no side effects: what answered it."""
    context = upstream.call_context(stream=False)
    with translated(upstream.who, upstream.timeout):
        if upstream.card.capabilities.extended_agent_card:
            await upstream.client.get_extended_agent_card(
                GetExtendedAgentCardRequest(), context=context
            )
            return "its extended card (GetExtendedAgentCard) answered"
        try:
            # A made-up id: no task of anyone's is read, whoever the credential is.
            await upstream.client.get_task(
                GetTaskRequest(id=f"connection-test-{uuid.uuid4()}", history_length=0),
                context=context,
            )
        except TaskNotFoundError:
            pass
    return "GetTask of a made-up task answered TaskNotFound"


def credential_refusal(exc: UpstreamFailed, *, who: str, sent: str) -> str:
    """The sentence for an upstream that refused the credential (HTTP 401 or 403, gRPC
    UNAUTHENTICATED or PERMISSION_DENIED); '' for any other failure."""
    cause = exc.__cause__
    if cause is None:
        return ""
    status = in_chain(cause, httpx.HTTPStatusError)
    rpc = in_chain(cause, grpc.aio.AioRpcError)
    if isinstance(status, httpx.HTTPStatusError) and status.response.status_code in (401, 403):
        answer = f"HTTP {status.response.status_code} {status.response.reason_phrase}"
    elif isinstance(rpc, grpc.aio.AioRpcError) and rpc.code() in REFUSED_GRPC:
        answer = f"gRPC {rpc.code().name}: {rpc.details()}"
    else:
        return ""
    if not sent:
        return _sentence(f"{who} asks for a credential (set token or api_key): {answer}")
    return _sentence(f"{who} refused {sent}: {answer}")


# --- errors ----------------------------------------------------------------------------------


class UpstreamFailed(Exception):
    """The upstream could not be reached or answered with an error; the message is one
    sentence fit for the tenant (`scrubbed` before it is shown). The SDK's or transport's error
    is its __cause__."""


def scrubbed(text: str, secrets: Mapping[str, str]) -> str:
    """`text` without the secrets' values: an upstream's error may quote what it was sent."""
    for value in secrets.values():
        if value:
            text = text.replace(value, "[secret]")
    return text


def upstream_problem(exc: Exception, who: str, timeout: float) -> str:
    """One sentence on why a call to the upstream failed, naming it (`who`)."""
    unsafe = in_chain(exc, UnsafeUrl)
    if unsafe is not None:
        return _sentence(f"{who} was not contacted: {unsafe.reason}")
    if any(in_chain(exc, k) for k in (A2AClientTimeoutError, TimeoutError, httpx.TimeoutException)):
        return f"{who} did not answer within {timeout:g} seconds."
    status = in_chain(exc, httpx.HTTPStatusError)
    if isinstance(status, httpx.HTTPStatusError):
        response = status.response
        said = (
            f": {exc.message}"
            if isinstance(exc, A2AError) and not isinstance(exc, A2AClientError)
            else ""
        )
        return _sentence(
            f"{who} answered HTTP {response.status_code} {response.reason_phrase}{said}"
        )
    rpc = in_chain(exc, grpc.aio.AioRpcError)
    if isinstance(rpc, grpc.aio.AioRpcError):
        return _sentence(f"{who} answered gRPC {rpc.code().name}: {rpc.details()}")
    if isinstance(exc, A2AError) and not isinstance(exc, A2AClientError):
        code = JSON_RPC_ERROR_CODE_MAP.get(type(exc))
        where = f" {code}" if code is not None else ""
        return _sentence(f"{who} answered error{where} ({type(exc).__name__}): {exc.message}")
    network = in_chain(exc, httpx.RequestError)
    if network is not None:
        return _sentence(f"{who} could not be reached: {network or type(network).__name__}")
    if isinstance(exc, AgentCardResolutionError):
        return _sentence(f"{who} did not return an agent card: {exc.message}")
    if isinstance(exc, A2AClientError):
        return _sentence(f"{who} failed: {exc.message}")
    return _sentence(f"{who} failed: {type(exc).__name__}: {exc}")


def _sentence(text: str) -> str:
    text = " ".join(text.split())  # one line, whatever the upstream's text held
    return text if text.endswith((".", "!", "?")) else f"{text}."


@contextlib.contextmanager
def translated(who: str, timeout: float) -> Iterator[None]:
    """Turn any error of the upstream call in the block into UpstreamFailed."""
    try:
        yield
    except UpstreamFailed:
        raise
    except Exception as exc:
        raise UpstreamFailed(upstream_problem(exc, who, timeout)) from exc


def card_label(card: AgentCard) -> str:
    return f'The upstream agent "{card.name}"' if card.name else "The upstream agent"


# --- connecting --------------------------------------------------------------------------------


def credential_headers(config: ProxyConfig, secrets: Mapping[str, str]) -> dict[str, str]:
    headers = {}
    if secrets.get("token"):
        headers["Authorization"] = f"Bearer {secrets['token']}"
    if secrets.get("api_key"):
        headers[config.api_key_header] = secrets["api_key"]
    return headers


async def card_fetch(config: ProxyConfig, http: httpx.AsyncClient) -> AgentCard:
    """The upstream's card, from `card_url` itself (no well-known path appended)."""
    with translated(f"The upstream agent's card at {config.card_url}", config.timeout_seconds):
        card = await A2ACardResolver(http, config.card_url, agent_card_path="").get_agent_card()
    if not card.supported_interfaces:
        raise UpstreamFailed(
            f"The upstream agent's card at {config.card_url} did not return an agent card (it "
            "lists no interfaces)."
        )
    return card


def grpc_target(address: str, card_url: str) -> tuple[str, bool]:
    """The channel target of a card's gRPC address, and whether it takes TLS (the rule is in
    the module's docstring)."""
    scheme, found, rest = address.partition("://")
    if not found:
        return address.rstrip("/"), httpx.URL(card_url).scheme == "https"
    scheme = scheme.lower()
    if scheme not in ("grpc", "grpcs", "http", "https"):
        raise UpstreamFailed(
            f"The upstream card's gRPC address {address!r} has an unknown scheme {scheme!r}."
        )
    return rest.rstrip("/"), scheme in ("grpcs", "https")


def binding_preference(config: ProxyConfig, card: AgentCard) -> tuple[list[str], bool]:
    """(the client's bindings, whether its order wins over the card's): the configured one when
    the card offers it, else the card's preferred one among those the client speaks."""
    offered = {i.protocol_binding for i in card.supported_interfaces}
    if config.binding != "auto" and config.binding in offered:
        return [config.binding], True
    return list(BINDINGS), False


@dataclass
class Upstream:
    """The client for one run (or one cancel), with what each call needs."""

    card: AgentCard
    client: Client
    streams: bool
    grpc_metadata: dict[str, str]
    timeout: float

    @property
    def who(self) -> str:
        return card_label(self.card)

    def call_context(self, *, stream: bool) -> ClientCallContext:
        # A unary call ends after the timeout; a stream only when an event takes that long
        # (responses() below): a gRPC deadline would end the whole stream.
        return ClientCallContext(
            timeout=None if stream else self.timeout,
            service_parameters=dict(self.grpc_metadata) or None,
        )

    async def responses(
        self, stream: AsyncIterator[StreamResponse]
    ) -> AsyncIterator[StreamResponse]:
        """The responses of an upstream stream; each must come within the timeout. The stream
        (and its connection) is closed however the caller stops, a cancel included."""
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            while True:
                with translated(self.who, self.timeout):
                    try:
                        async with asyncio.timeout(self.timeout):
                            response = await anext(stream)
                    except StopAsyncIteration:
                        return
                yield response


@contextlib.asynccontextmanager
async def upstream_connect(
    config: ProxyConfig, secrets: Mapping[str, str], card: AgentCard | None = None
) -> AsyncIterator[Upstream]:
    """A client for the upstream (its card fetched unless given), closed on the way out."""
    headers = credential_headers(config, secrets)
    async with http_client(timeout=config.timeout_seconds, headers=headers) as http:
        if card is None:
            card = await card_fetch(config, http)
        who = card_label(card)
        bindings, client_first = binding_preference(config, card)
        if not {i.protocol_binding for i in card.supported_interfaces} & set(bindings):
            raise UpstreamFailed(
                f"{who} offers no binding this proxy speaks ({', '.join(BINDINGS)})."
            )
        targets: list[str] = []

        def channel(address: str) -> grpc.aio.Channel:
            target, tls = grpc_target(address, config.card_url)
            targets.append(target)
            if tls:
                return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials())
            return grpc.aio.insecure_channel(target)

        streams = config.streaming and card.capabilities.streaming
        with translated(who, config.timeout_seconds):
            client = ClientFactory(
                ClientConfig(
                    httpx_client=http,
                    streaming=streams,
                    supported_protocol_bindings=bindings,
                    use_client_preference=client_first,
                    grpc_channel_factory=channel,
                )
            ).create(card)
        try:
            for target in targets:  # a gRPC channel connects at its first call: check first
                with translated(who, config.timeout_seconds):
                    await asyncio.to_thread(
                        url_check,
                        f"http://{target}",
                        policy=AGENT,
                        what="the card's gRPC interface",
                    )
            # gRPC has no httpx client to carry the credentials: they go as metadata.
            metadata = {name.lower(): value for name, value in headers.items()} if targets else {}
            yield Upstream(card, client, streams, metadata, config.timeout_seconds)
        finally:
            with contextlib.suppress(Exception):
                await client.close()


# --- mapping -------------------------------------------------------------------------------


def our_message_id(task_id: str, upstream_message_id: str) -> str:
    """The id on our side of an upstream message: unique to our task, the same each time."""
    if not upstream_message_id:
        return str(uuid.uuid4())
    return str(uuid.uuid5(_IDS, f"{task_id}\x00{upstream_message_id}"))


def outgoing_message(
    message: Message, *, task_id: str, upstream_task_id: str, upstream_context_id: str
) -> Message:
    """The user's message as it goes upstream: its parts, metadata and extensions as they are;
    the upstream's task and context ids; no references to our tasks, which mean nothing there.

    Its id is the caller's, suffixed with a digest of our task's id and the caller's id. All
    our callers reach the upstream with the one credential of this agent, so the caller's id
    alone could match another caller's earlier message there (an upstream that deduplicates
    by messageId would answer with the other's task); the prefix keeps it traceable (and an
    upstream that routes on it, as the TCK's agents do, still can). A retried run repeats it.
    """
    out = Message()
    out.CopyFrom(message)
    digest = uuid.uuid5(_IDS, f"out\x00{task_id}\x00{message.message_id}")
    out.message_id = f"{message.message_id[:MESSAGE_ID_PREFIX]}~{digest}"
    out.task_id = upstream_task_id
    out.context_id = upstream_context_id
    out.role = Role.ROLE_USER
    del out.reference_task_ids[:]
    return out


@dataclass
class Relay:
    """Turns the upstream's responses into events of our task, and remembers what it saw: the
    upstream ids, the state, the artifacts our task holds, the messages already relayed."""

    task_id: str
    context_id: str
    upstream_task_id: str = ""
    upstream_context_id: str = ""
    # The id of our user message that went upstream (kept: a run of the same turn that starts
    # again, after a worker stopped, follows the upstream task instead of sending it twice).
    sent: str = ""
    state: int = TaskState.TASK_STATE_WORKING
    settled: bool = False
    artifacts: dict[str, Artifact] = field(default_factory=dict)
    said: set[str] = field(default_factory=set)

    @classmethod
    def for_task(cls, task_id: str, context_id: str, current: Task | None) -> Relay:
        relay = cls(task_id, context_id)
        if current is not None:
            relay.artifacts = {a.artifact_id: a for a in current.artifacts}
            relay.said = {m.message_id for m in current.history}
            if current.status.HasField("message"):
                relay.said.add(current.status.message.message_id)
        return relay

    def kept(self) -> dict[str, str]:
        """What the task keeps between runs (PlatformRun.state)."""
        return {
            "task_id": self.upstream_task_id,
            "context_id": self.upstream_context_id,
            "sent": self.sent,
        }

    def status(self, state: int, text: str = "") -> TaskStatusUpdateEvent:
        """An event of our own (not relayed): working at the start, failed, canceled."""
        status = TaskStatus(state=state)  # type: ignore[arg-type]
        status.timestamp.GetCurrentTime()
        if text:
            status.message.CopyFrom(
                Message(
                    message_id=str(uuid.uuid4()),
                    role=Role.ROLE_AGENT,
                    task_id=self.task_id,
                    context_id=self.context_id,
                    parts=[Part(text=text)],
                )
            )
        self.state = state
        self.settled = self.settled or state in SETTLED
        return TaskStatusUpdateEvent(
            task_id=self.task_id, context_id=self.context_id, status=status
        )

    def take(self, response: StreamResponse) -> list[Event]:
        kind = response.WhichOneof("payload")
        if kind == "task":
            return self._task(response.task)
        if kind == "status_update":
            update = response.status_update
            self._ids(update.task_id, update.context_id)
            metadata = update.metadata if update.HasField("metadata") else None
            return self._status(update.status, metadata)
        if kind == "artifact_update":
            update = response.artifact_update
            self._ids(update.task_id, update.context_id)
            return [self._artifact(update.artifact, update.append, update.last_chunk)]
        if kind == "message":
            return self._message(response.message)
        return []

    def _ids(self, task_id: str, context_id: str) -> None:
        self.upstream_task_id = task_id or self.upstream_task_id
        self.upstream_context_id = context_id or self.upstream_context_id

    def take_polled(self, task: Task) -> list[Event]:
        """A task read with GetTask while following it, its history included when it completed
        without a status message: it may have ended with a direct reply (a Message the upstream
        answered with while no stream was open, kept in its history). Then the agent's last
        message after the last user message, if not relayed yet, becomes our reply."""
        reply = _reply_in(task) if task.status.state == TaskState.TASK_STATE_COMPLETED else None
        if reply is None or our_message_id(self.task_id, reply.message_id) in self.said:
            return self._task(task)
        artifacts_only = Task()
        artifacts_only.CopyFrom(task)
        artifacts_only.ClearField("status")
        return self._task(artifacts_only) + self._message(reply)

    def _task(self, task: Task) -> list[Event]:
        self._ids(task.id, task.context_id)
        events: list[Event] = []
        for artifact in task.artifacts:
            # Compared as stored: a streamed artifact's text chunks are joined in our task
            # (tasks_app.artifacts), and may or may not be in the upstream's.
            known = self.artifacts.get(artifact.artifact_id)
            if known is None or artifact_joined(known) != artifact_joined(artifact):
                events.append(self._artifact(artifact, append=False, last_chunk=True))
        if task.HasField("status"):
            events.extend(self._status(task.status, None))
        return events

    def _status(self, status: TaskStatus, metadata: object | None) -> list[Event]:
        state = status.state
        if state == TaskState.TASK_STATE_UNSPECIFIED or self.settled:
            return []
        message = None
        if status.HasField("message"):
            message = self._message_ours(status.message)
            if message.message_id in self.said:
                message = None  # relayed already (a snapshot repeating an update)
        if state == TaskState.TASK_STATE_SUBMITTED:
            state = TaskState.TASK_STATE_WORKING  # ours is past submitted: the run has it
        if state == self.state and message is None and metadata is None:
            return []  # nothing new
        ours = TaskStatus(state=state)
        if status.HasField("timestamp"):
            ours.timestamp.CopyFrom(status.timestamp)
        else:
            ours.timestamp.GetCurrentTime()
        if message is not None:
            self.said.add(message.message_id)
            ours.message.CopyFrom(message)
        self.state = state
        self.settled = state in SETTLED
        event = TaskStatusUpdateEvent(task_id=self.task_id, context_id=self.context_id, status=ours)
        if metadata is not None:
            event.metadata.CopyFrom(metadata)  # type: ignore[arg-type]
        return [event]

    def _artifact(self, artifact: Artifact, append: bool, last_chunk: bool) -> Event:
        known = self.artifacts.get(artifact.artifact_id)
        if append and known is not None:
            merged = Artifact()
            merged.CopyFrom(known)
            artifact_parts_append(merged, artifact.parts)
            self.artifacts[artifact.artifact_id] = merged
        else:
            self.artifacts[artifact.artifact_id] = artifact
        return TaskArtifactUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            artifact=artifact,
            append=append,
            last_chunk=last_chunk,
        )

    def _message(self, message: Message) -> list[Event]:
        """A direct reply: the exchange is over, our task completes with it."""
        self.upstream_context_id = message.context_id or self.upstream_context_id
        if self.settled:
            return []
        ours = self._message_ours(message)
        ours.role = Role.ROLE_AGENT
        self.said.add(ours.message_id)
        self.state = TaskState.TASK_STATE_COMPLETED
        self.settled = True
        return [ours]

    def _message_ours(self, message: Message) -> Message:
        ours = Message()
        ours.CopyFrom(message)
        ours.message_id = our_message_id(self.task_id, message.message_id)
        ours.task_id = self.task_id
        ours.context_id = self.context_id
        del ours.reference_task_ids[:]
        return ours


def _reply_in(task: Task) -> Message | None:
    if task.status.HasField("message"):
        return None
    for message in reversed(task.history):
        if message.role == Role.ROLE_USER:
            return None
        if message.role == Role.ROLE_AGENT:
            return message
    return None


# --- the executor --------------------------------------------------------------------------


class ProxyExecutor(AgentExecutor):
    def __init__(self, config: ProxyConfig, secrets: Mapping[str, str]) -> None:
        self.config = config
        self._secrets = dict(secrets)
        self._card: AgentCard | None = None  # fetched by execute(), reused by cancel()
        self._upstream_tasks: dict[str, str] = {}  # our task id -> the upstream's

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        run = platform_run(context)
        relay = Relay.for_task(run.task_id, run.context_id, context.current_task)
        kept = await run.state()
        relay.upstream_task_id = kept.get("task_id", "")
        relay.upstream_context_id = kept.get("context_id", "")
        relay.sent = kept.get("sent", "")
        if not relay.upstream_context_id:
            relay.upstream_context_id = (await run.context_state()).get("context_id", "")
        saved = relay.kept()
        await event_queue.enqueue_event(relay.status(TaskState.TASK_STATE_WORKING))

        async def forward(events: list[Event]) -> None:
            nonlocal saved
            if relay.kept() != saved:  # kept first: a cancel from now on reaches the upstream
                self._upstream_tasks[run.task_id] = relay.upstream_task_id
                saved = relay.kept()
                await run.state_save(saved)
            for event in events:
                await event_queue.enqueue_event(event)

        try:
            async with upstream_connect(self.config, self._secrets, self._card) as upstream:
                self._card = upstream.card
                if relay.sent != context.message.message_id or not relay.upstream_task_id:
                    await self._send(context.message, context, upstream, relay, forward)
                await self._follow(upstream, relay, forward)
        except UpstreamFailed as exc:
            reason = scrubbed(str(exc), self._secrets)
            logger.info("a2a-proxy task %s: %s", run.task_id, reason)
            if not relay.settled:
                await event_queue.enqueue_event(relay.status(TaskState.TASK_STATE_FAILED, reason))

    async def _send(
        self,
        message: Message,
        context: RequestContext,
        upstream: Upstream,
        relay: Relay,
        forward: Callable[[list[Event]], Awaitable[None]],
    ) -> None:
        """Send the user's message upstream and relay what comes back, until the upstream task
        settles or the answer ends."""
        follow_up = bool(relay.upstream_task_id)
        request = SendMessageRequest(
            message=outgoing_message(
                message,
                task_id=relay.task_id,
                upstream_task_id=relay.upstream_task_id,
                upstream_context_id=relay.upstream_context_id,
            )
        )
        relay.sent = message.message_id
        if context.configuration is not None:
            modes = context.configuration.accepted_output_modes
            request.configuration.accepted_output_modes.extend(modes)
        if not upstream.streams and not follow_up:
            # The upstream task's id at once (a cancel can reach it), then GetTask. A follow-up
            # blocks instead: the task it continues still shows the turn before until the
            # upstream agent takes the message, and a poll would read that as this turn's end.
            request.configuration.return_immediately = True
        answer = upstream.client.send_message(
            request, context=upstream.call_context(stream=upstream.streams)
        )
        async with contextlib.aclosing(upstream.responses(answer)) as responses:
            async for response in responses:
                await forward(relay.take(response))
                if relay.settled:
                    return

    async def _follow(
        self,
        upstream: Upstream,
        relay: Relay,
        forward: Callable[[list[Event]], Awaitable[None]],
    ) -> None:
        """Follow the upstream task until it settles: GetTask, then (when the upstream streams)
        SubscribeToTask, else GetTask again, less and less often."""
        client, who = upstream.client, upstream.who
        delay = POLL_FIRST_SECONDS
        while not relay.settled:
            if not relay.upstream_task_id:
                raise UpstreamFailed(f"{who} answered with neither a task nor a message.")
            with translated(who, upstream.timeout):
                task = await client.get_task(
                    GetTaskRequest(id=relay.upstream_task_id, history_length=0),
                    context=upstream.call_context(stream=False),
                )
                completed = task.status.state == TaskState.TASK_STATE_COMPLETED
                if completed and not task.status.HasField("message"):
                    # Completed without a word: its history may hold a direct reply.
                    task = await client.get_task(
                        GetTaskRequest(id=relay.upstream_task_id),
                        context=upstream.call_context(stream=False),
                    )
            await forward(relay.take_polled(task))
            if relay.settled:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, POLL_MAX_SECONDS)
            if not upstream.streams:
                continue
            subscription = client.subscribe(
                SubscribeToTaskRequest(id=relay.upstream_task_id),
                context=upstream.call_context(stream=True),
            )
            try:
                async with contextlib.aclosing(upstream.responses(subscription)) as responses:
                    async for response in responses:
                        await forward(relay.take(response))
                        if relay.settled:
                            return
            except UpstreamFailed as exc:
                # It ended between GetTask and SubscribeToTask: the next GetTask says how.
                if not isinstance(exc.__cause__, UnsupportedOperationError):
                    raise

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        run = platform_run(context)
        relay = Relay(run.task_id, run.context_id)
        upstream_task_id = (await run.state()).get("task_id") or self._upstream_tasks.get(
            run.task_id, ""
        )
        note = ""
        if upstream_task_id:
            try:
                async with upstream_connect(self.config, self._secrets, self._card) as upstream:
                    with translated(upstream.who, upstream.timeout):
                        await upstream.client.cancel_task(
                            CancelTaskRequest(id=upstream_task_id),
                            context=upstream.call_context(stream=False),
                        )
            except UpstreamFailed as exc:
                note = f"Canceled here; the upstream task may still run. {exc}"
                note = scrubbed(note, self._secrets)
        await event_queue.enqueue_event(relay.status(TaskState.TASK_STATE_CANCELED, note))
