"""The a2a-sdk's own server, for bench/compare.py: the other side of the comparison.

    .venv/bin/python bench/sdk_server.py --port 8100 \\
        --database-url postgresql+asyncpg://postgres@127.0.0.1:5432/sdk \\
        --agents '{"echo": {}, "io": {"delay_seconds": 2}}' [--api-key KEY]

One process, one uvicorn event loop: a2a-sdk 1.3 `DefaultRequestHandler` with a
`DatabaseTaskStore` (SQLAlchemy async + asyncpg) per agent, each agent's JSON-RPC endpoint
(v1.0; v0.3 compat off) at `/a2a/bench/<agent>/`, its card beside it, the same URL shape as
the platform's. Each agent's tasks live in their own table, `tasks_<agent>`, so an agent's
stored tasks are what its ListTasks scans (the platform's agents share one table, scoped by
an indexed agent column).

The executor repeats what the platform's `echo` executor (agents/executors/echo.py) does,
including its `delay_seconds` and `input_required` options and its cancel(), so both servers
run the same agent code; only the hosting differs.

`--api-key`: requests must carry `X-API-Key: <key>` (else 401), and the caller becomes the
user `key:bench`, the owner of its tasks, as the platform scopes tasks by the key's principal.
The check is a constant-time string compare, not a database lookup as the platform's is.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from a2a.helpers.proto_helpers import new_task, new_text_artifact, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import DatabaseTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Role, TaskState
from sqlalchemy.ext.asyncio import create_async_engine
from starlette.applications import Starlette
from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    SimpleUser,
)
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

OWNER = "key:bench"


class EchoExecutor(AgentExecutor):
    """agents/executors/echo.py; its config a plain dict (the platform checks it with pydantic)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.input_required = bool(config.get("input_required", False))
        self.delay_seconds = float(config.get("delay_seconds", 0.0))

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.current_task is None and context.message is not None:
            # The SDK's handler wants the Task as the first event of a new task (the platform
            # creates it before the run): the usual first line of an SDK executor.
            await event_queue.enqueue_event(
                new_task(
                    context.task_id or "",
                    context.context_id or "",
                    TaskState.TASK_STATE_SUBMITTED,
                    history=[context.message],
                )
            )
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.start_work()
        if self.delay_seconds:
            await asyncio.sleep(self.delay_seconds)
        task = context.current_task
        user_turns = [m for m in (task.history if task else []) if m.role == Role.ROLE_USER]
        if self.input_required and len(user_turns) <= 1:
            await updater.requires_input(
                updater.new_agent_message(
                    new_text_message("Send one more message and I will echo both.").parts
                )
            )
            return
        texts = [_text_of(m) for m in user_turns] or [context.get_user_input()]
        text = "\n".join(t for t in texts if t)
        await updater.add_artifact(new_text_artifact("echo", text).parts, name="echo")
        await updater.complete(updater.new_agent_message(new_text_message(f"Echoed: {text}").parts))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.update_status(TaskState.TASK_STATE_CANCELED)


def _text_of(message: Any) -> str:
    return "\n".join(p.text for p in message.parts if p.HasField("text"))


class KeyBackend(AuthenticationBackend):
    def __init__(self, key: str) -> None:
        self.key = key

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser] | None:
        if not conn.url.path.startswith("/a2a/") or conn.url.path.endswith("agent-card.json"):
            return None  # health and cards are public, as on the platform
        sent = conn.headers.get("x-api-key", "")
        if not hmac.compare_digest(sent.encode(), self.key.encode()):
            raise AuthenticationError("a valid X-API-Key is required")
        return AuthCredentials(["authenticated"]), SimpleUser(OWNER)


def _card(slug: str, base_url: str) -> AgentCard:
    return AgentCard(
        name=slug,
        description=f"The {slug} agent (a2a-sdk server, bench).",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=base_url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="echo", name="Echo", description="Repeats what you send.", tags=["bench"])
        ],
    )


def build_app(
    *, database_url: str, agents: dict[str, dict[str, Any]], public_base: str, api_key: str
) -> Starlette:
    engine = create_async_engine(database_url, pool_size=10, max_overflow=10)
    stores: list[DatabaseTaskStore] = []
    handlers: list[DefaultRequestHandler] = []
    routes: list[Any] = []

    async def health(_request: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    async def tables(_request: Any) -> JSONResponse:
        return JSONResponse({slug: f"tasks_{slug}" for slug in agents})

    routes.append(Route("/healthz", health))
    routes.append(Route("/tables", tables))
    for slug, config in agents.items():
        path = f"/a2a/bench/{slug}/"
        card = _card(slug, public_base.rstrip("/") + path)
        store = DatabaseTaskStore(engine, create_table=True, table_name=f"tasks_{slug}")
        handler = DefaultRequestHandler(
            agent_executor=EchoExecutor(config), task_store=store, agent_card=card
        )
        stores.append(store)
        handlers.append(handler)
        routes.extend(create_jsonrpc_routes(handler, rpc_url=path))
        routes.extend(create_agent_card_routes(card, card_url=path + ".well-known/agent-card.json"))

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        for store in stores:  # tables exist before the first request (and before seeding)
            await store.initialize()
        yield
        for handler in handlers:
            await handler.aclose()
        await engine.dispose()

    middleware = []
    if api_key:
        middleware.append(
            Middleware(
                AuthenticationMiddleware,
                backend=KeyBackend(api_key),
                on_error=lambda _conn, exc: JSONResponse({"error": str(exc)}, status_code=401),
            )
        )
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database-url", required=True, help="postgresql+asyncpg://...")
    parser.add_argument("--agents", default='{"echo": {}}', help="JSON: agent slug -> config")
    parser.add_argument("--api-key", default="")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)  # the SDK's own loggers: warnings only
    app = build_app(
        database_url=args.database_url,
        agents=json.loads(args.agents),
        public_base=f"http://{args.host}:{args.port}",
        api_key=args.api_key,
    )
    # One process, uvicorn's defaults: uvloop and httptools when installed (the `bench` extra),
    # and an access log line per request, as daphne writes one.
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
