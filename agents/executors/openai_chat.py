"""The `openai` executor: an agent backed by any OpenAI-compatible chat-completions endpoint.

A run sends the system prompt, the conversation's earlier messages (earlier tasks with the same
contextId, at most `history_turns` of them) and the task's own history to
`<base_url>/chat/completions` with the official `openai` client, streaming. Each piece of text
the model streams becomes a chunk of one artifact ("response"), so streaming clients see the
reply grow (the stored task holds it as one text: tasks_app.artifacts); the task then
completes with an agent message holding the whole reply (what the next turn of the
conversation reads back), and the token usage goes into the task's metadata and the tenant's
usage (agents.usage).

The client's own retries handle 429, 5xx and timeouts (`max_retries`, its backoff, Retry-After);
when they run out, or the endpoint refuses the key, the task fails with a reason that names what
the endpoint answered. Every connection passes the SSRF guard (outbound.http_client). The client
takes nothing from the worker's environment (OPENAI_* variables): the operator's credentials
never reach a tenant's endpoint.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from typing import Any, TypedDict

import httpx
import openai
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Role, TaskState
from google.protobuf.json_format import MessageToDict
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletionMessageParam
from pydantic import BaseModel, ConfigDict, Field

from a2a_platform.ssrf import UnsafeUrl

from .. import usage
from .outbound import ConnectionTestFailed, error_chain, http_client, in_chain, url_problem
from .platform import platform_run

SECRET_NAMES = ("api_key",)

ARTIFACT_NAME = "response"
# "Test connection" waits at most this long, whatever the agent's own timeout.
CONNECTION_TEST_TIMEOUT_SECONDS = 15.0
# Upstream error text longer than this is left out of reasons: it is a page, not a message.
UPSTREAM_MESSAGE_LIMIT = 300
# The openai client wants a key; with none configured it gets this one, never sent
# (_auth_headers).
NO_KEY = "no-key-configured"


class OpenAIConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(
        description="The endpoint's base URL, up to and including its version, e.g. "
        "https://api.openai.com/v1 (requests go to <base_url>/chat/completions).",
        min_length=1,
        max_length=2000,
    )
    model: str = Field(
        description="The model to ask, e.g. gpt-4o-mini.", min_length=1, max_length=200
    )
    system_prompt: str = Field(
        default="", max_length=100_000, description="Sent first, as the system message."
    )
    temperature: float | None = Field(
        default=None, ge=0, le=2, description="Sampling temperature; empty: the endpoint's default."
    )
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="At most this many tokens in a reply; empty: the endpoint's default.",
    )
    history_turns: int = Field(
        default=20,
        ge=0,
        le=1000,
        description="How many earlier messages of the conversation (earlier tasks with the "
        "same contextId) are sent before this task's own.",
    )
    timeout_seconds: float = Field(
        default=60,
        gt=0,
        le=3600,
        description="Connecting, and waiting for each part of the reply, ends after this long.",
    )
    max_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Times a 429, a 5xx or a timeout is retried (with backoff) before the task "
        "fails; a 401 or 403 is never retried.",
    )


def save_check(config: OpenAIConfig) -> dict[str, str]:
    problem = url_problem(config.base_url, "base_url")
    return {"base_url": problem} if problem else {}


def build(config: OpenAIConfig, secrets: Mapping[str, str]) -> AgentExecutor:
    return OpenAIChatExecutor(config, api_key=secrets.get("api_key", ""))


class UsageMetadata(TypedDict):
    model: str
    promptTokens: int
    completionTokens: int
    totalTokens: int


class OpenAIChatExecutor(AgentExecutor):
    def __init__(self, config: OpenAIConfig, *, api_key: str = "") -> None:
        self.config = config
        self._api_key = api_key

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        config = self.config
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.start_work()
        earlier = (
            await platform_run(context).conversation(earlier=config.history_turns)
            if config.history_turns
            else []
        )
        task = context.current_task
        messages = chat_messages(
            system_prompt=config.system_prompt,
            earlier=earlier,
            history=list(task.history) if task else [],
            current=context.message,
        )
        options: dict[str, Any] = {}
        if config.temperature is not None:
            options["temperature"] = config.temperature
        if config.max_tokens is not None:
            options["max_tokens"] = config.max_tokens

        reply = _Reply(updater)
        client = _client(
            config, self._api_key, timeout=config.timeout_seconds, max_retries=config.max_retries
        )
        try:
            stream = await client.chat.completions.create(
                model=config.model,
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
                extra_headers=_auth_headers(self._api_key),
                **options,
            )
            # Leaving this block, however (a cancel included), closes the upstream stream.
            async with stream:
                async for chunk in stream:
                    if chunk.usage is not None:
                        reply.usage = usage_metadata(chunk.usage, chunk.model or config.model)
                    for choice in (chunk.choices or [])[:1]:
                        if choice.finish_reason:
                            reply.finish_reason = choice.finish_reason
                        if choice.delta and choice.delta.content:
                            await reply.add(choice.delta.content)
        except (openai.OpenAIError, httpx.HTTPError, UnsafeUrl) as exc:
            await reply.close()
            reason = failure_reason(
                exc,
                timeout=config.timeout_seconds,
                secret=self._api_key,
                midway=reply.started,
            )
            await updater.failed(updater.new_agent_message([Part(text=reason)]))
            return
        finally:
            await client.close()
            # What the model reported it used, however the reply ended (the tenant's usage).
            if reply.usage:
                usage.run_count(
                    tokens_in=reply.usage["promptTokens"],
                    tokens_out=reply.usage["completionTokens"],
                )
        await reply.close()
        text = reply.text or (
            "The model sent an empty reply"
            + (f" (finish reason: {reply.finish_reason})." if reply.finish_reason else ".")
        )
        await updater.update_status(
            TaskState.TASK_STATE_COMPLETED,
            message=updater.new_agent_message([Part(text=text)]),
            metadata={"usage": dict(reply.usage)} if reply.usage else None,
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.update_status(TaskState.TASK_STATE_CANCELED)


class _Reply:
    """The streamed reply, as artifact chunks: each piece goes out when the next one comes, so
    the last can be marked `last_chunk` (an artifact chunk must carry at least one part)."""

    def __init__(self, updater: TaskUpdater) -> None:
        self._updater = updater
        self._pieces: list[str] = []
        self._held: str | None = None
        self._sent = 0
        self._artifact_id = ""
        self.usage: UsageMetadata | None = None
        self.finish_reason = ""

    @property
    def text(self) -> str:
        return "".join(self._pieces)

    @property
    def started(self) -> bool:
        return bool(self._pieces)

    async def add(self, piece: str) -> None:
        self._pieces.append(piece)
        if self._held is not None:
            await self._send(self._held, last=False)
        self._held = piece

    async def close(self) -> None:
        """Send the piece still held, as the last chunk."""
        if self._held is not None:
            held, self._held = self._held, None
            await self._send(held, last=True)

    async def _send(self, piece: str, *, last: bool) -> None:
        first = self._sent == 0
        if first:
            self._artifact_id = str(uuid.uuid4())
        await self._updater.add_artifact(
            [Part(text=piece)],
            artifact_id=self._artifact_id,
            name=ARTIFACT_NAME,
            append=not first,
            last_chunk=last,
        )
        self._sent += 1


# --- the request ----------------------------------------------------------------------------


def chat_messages(
    *,
    system_prompt: str,
    earlier: Sequence[Message],
    history: Sequence[Message],
    current: Message | None,
) -> list[ChatCompletionMessageParam]:
    """The chat messages of a run: the system prompt, the conversation's earlier messages, then
    the task's own history up to and including the message this run answers (sent once, whether
    or not the history holds it already)."""
    own = list(history)
    if current is not None:
        at = [i for i, m in enumerate(own) if m.message_id == current.message_id]
        if at:
            del own[at[-1] + 1 :]  # anything after it is for a later run
        else:
            own.append(current)
    messages: list[ChatCompletionMessageParam] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    for message in [*earlier, *own]:
        content = message_text(message.parts)
        if not content:
            continue
        if message.role == Role.ROLE_AGENT:
            messages.append({"role": "assistant", "content": content})
        else:
            messages.append({"role": "user", "content": content})
    return messages


def message_text(parts: Iterable[Part]) -> str:
    """A message's parts as one text for the model: text as it is, data as compact JSON, files
    as a note naming them (with their URL if they have one; bytes are not sent)."""
    pieces: list[str] = []
    for part in parts:
        content = part.WhichOneof("content")
        if content == "text":
            pieces.append(part.text)
        elif content == "data":
            value = _whole_numbers(MessageToDict(part.data))
            pieces.append(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
        elif content in ("url", "raw"):
            what = f"{part.filename or 'unnamed'} ({part.media_type or 'type not given'})"
            if content == "url":
                pieces.append(f"[File {what} at {part.url}]")
            else:
                pieces.append(
                    f"[File {what}, {len(part.raw)} bytes: its content is not sent to the model]"
                )
    return "\n".join(p for p in pieces if p)


def _whole_numbers(value: Any) -> Any:
    """JSON as the sender wrote it: protobuf keeps every number as a double (3 -> 3.0)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    return value


def usage_metadata(usage: CompletionUsage, model: str) -> UsageMetadata:
    return {
        "model": model,
        "promptTokens": usage.prompt_tokens,
        "completionTokens": usage.completion_tokens,
        "totalTokens": usage.total_tokens,
    }


def _client(
    config: OpenAIConfig, api_key: str, *, timeout: float, max_retries: int
) -> openai.AsyncOpenAI:
    """The openai client for one run or test, on a guarded httpx client. Headers the client
    would take from the environment (organization, project, OPENAI_CUSTOM_HEADERS) are left
    out. Its requests take `_auth_headers(api_key)`."""
    left_out = {"OpenAI-Organization", "OpenAI-Project"}
    for line in os.environ.get("OPENAI_CUSTOM_HEADERS", "").split("\n"):
        name, colon, _ = line.partition(":")
        if colon and name.strip():
            left_out.add(name.strip())
    return openai.AsyncOpenAI(
        base_url=config.base_url,
        api_key=api_key or NO_KEY,
        http_client=http_client(timeout=timeout),
        max_retries=max_retries,
        timeout=timeout,
        default_headers={name: openai.omit for name in left_out},  # type: ignore[misc]
    )


def _auth_headers(api_key: str) -> dict[str, Any]:
    """A request's extra headers: with no key configured, no Authorization header at all
    (the client would send its placeholder key)."""
    return {} if api_key else {"Authorization": openai.omit}


# --- what went wrong ------------------------------------------------------------------------


def failure_reason(
    exc: BaseException, *, timeout: float, secret: str = "", midway: bool = False
) -> str:
    """One sentence for the tenant naming what the endpoint did: its HTTP status, a timeout,
    the SSRF guard's refusal. The endpoint's own message is quoted when short (the key never)."""
    refusal = in_chain(exc, UnsafeUrl)
    if refusal is not None:
        return refusal.reason
    seconds = f"{timeout:g} s"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        tried = _attempts(exc.response.request)
        if status in (401, 403):
            reason = f"The model endpoint refused the API key (HTTP {status})"
        else:
            reason = f"The model endpoint answered HTTP {status} ({_status_phrase(status)})"
            if tried > 1:
                reason += f" after {tried} attempts"
        return reason + _quoted(_upstream_message(exc), secret)
    if isinstance(exc, openai.APITimeoutError):
        tried = _attempts(exc.request)
        return (
            f"The model endpoint did not answer within {seconds} "
            f"({tried} attempt{'s' if tried != 1 else ''})."
        )
    if isinstance(exc, openai.APIConnectionError):
        tried = _attempts(exc.request)
        cause = _root_cause(exc)
        detail = f": {type(cause).__name__}: {cause}" if cause is not exc and str(cause) else ""
        after = f" after {tried} attempts" if tried > 1 else ""
        return _redact(f"Could not connect to the model endpoint{after}{detail}.", secret)
    if isinstance(exc, openai.APIError):  # an error object inside the stream
        where = " in the middle of its reply" if midway else ""
        return f"The model endpoint reported an error{where}" + _quoted(exc.message, secret)
    if isinstance(exc, httpx.TimeoutException):
        return (
            f"The model endpoint went quiet for more than {seconds} in the middle of its reply."
            if midway
            else f"The model endpoint did not answer within {seconds}."
        )
    if isinstance(exc, httpx.HTTPError):
        detail = f"{type(exc).__name__}: {exc}"
        return _redact(f"The model endpoint's reply broke off: {detail}.", secret)
    if isinstance(exc, openai.OpenAIError):
        return _redact(f"The model endpoint could not be used: {exc}.", secret)
    return _redact(f"The model endpoint could not be used: {type(exc).__name__}: {exc}.", secret)


def _root_cause(exc: BaseException) -> BaseException:
    *_, last = error_chain(exc)
    return last


def _attempts(request: httpx.Request | None) -> int:
    """How many requests the client made: the last one carries its retry count."""
    try:
        return int((request.headers if request else {}).get("x-stainless-retry-count", 0)) + 1
    except ValueError:
        return 1


def _status_phrase(status: int) -> str:
    if status == 429:
        return "rate limited"
    try:
        return HTTPStatus(status).phrase.lower()
    except ValueError:
        return "server error" if status >= 500 else "client error"


def _upstream_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        message = body.get("message")
        if message is None and isinstance(body.get("error"), Mapping):
            message = body["error"].get("message")
        return message if isinstance(message, str) else ""
    if isinstance(body, str):
        return body
    return ""


def _quoted(message: str, secret: str) -> str:
    """': <message>.' when the message is short and one line, else '.'."""
    message = " ".join((message or "").split())
    if not message or len(message) > UPSTREAM_MESSAGE_LIMIT or "<" in message:
        return "."
    message = _redact(message, secret).rstrip(".")
    return f": {message}."


def _redact(text: str, secret: str) -> str:
    return text.replace(secret, "[redacted]") if secret else text


# --- "test connection" ----------------------------------------------------------------------


async def connection_test(
    config: OpenAIConfig, secrets: Mapping[str, str], *, agent_path: str = ""
) -> str:
    """List the endpoint's models (or, where it lists none, ask for a one-token completion):
    one line of what answered, or ConnectionTestFailed naming the status. (Nothing is signed:
    `agent_path` is not needed.)"""
    timeout = min(config.timeout_seconds, CONNECTION_TEST_TIMEOUT_SECONDS)
    api_key = secrets.get("api_key", "")
    client = _client(config, api_key, timeout=timeout, max_retries=0)
    try:
        try:
            page = await client.models.list(extra_headers=_auth_headers(api_key))
        except openai.APIStatusError as exc:
            if exc.status_code not in (404, 405):
                raise
            await client.chat.completions.create(
                model=config.model,
                messages=[{"role": "user", "content": "Say OK."}],
                max_tokens=1,
                extra_headers=_auth_headers(api_key),
            )
            return (
                f"Reached {config.base_url}: it lists no models (HTTP {exc.status_code}), "
                f"and {config.model} answered a one-token completion."
            )
        data = page.data if isinstance(getattr(page, "data", None), list) else None
        if data is None:
            raise ConnectionTestFailed(
                f"Reached {config.base_url}, but its model list is not one: is the URL the "
                "endpoint's base URL (up to and including its version)?"
            )
        ids = [model.id for model in data if isinstance(getattr(model, "id", None), str)]
    except (openai.OpenAIError, httpx.HTTPError, UnsafeUrl) as exc:
        raise ConnectionTestFailed(failure_reason(exc, timeout=timeout, secret=api_key)) from None
    finally:
        await client.close()
    count = f"{len(ids)} model{'s' if len(ids) != 1 else ''}"
    if config.model in ids:
        return f"Reached {config.base_url}: {count}, {config.model} among them."
    return f"Reached {config.base_url}: {count}, but {config.model} is not among them."
