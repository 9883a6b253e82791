"""kombu's filesystem broker with atomic writes, for the embedded profile.

kombu's filesystem transport writes a message file in place, and a consumer may pick it up
half written: the worker then fails to decode it, the message is gone, and the consumer stops.
This channel writes each message under a name the consumer ignores and renames it into place,
which is atomic, so a consumer sees a whole message or none.

The exchange tables (which queues an exchange routes to) had the same flaw: the first bind
created the file empty and only then locked and wrote it, so a producer reading the table in
between read nothing and failed to decode it. The first bind now writes the table under another
name and links it into place whole.

kombu keeps the bindings it has declared in one state shared by the whole process, and records a
binding there before writing it to the table. A second thread binding the same queue saw it
recorded, skipped the write, and published while the table did not yet exist: its messages
went nowhere. Here every bind makes sure the table holds the binding before it returns.

For `redis://` (and `rediss://`) URLs, the production profile's broker: kombu's own Redis
transport, with one Redis client per channel instead of one per command. kombu's Redis channel
builds a new `redis.Redis` for every command it sends outside its polling loop: each publish,
and the `acks_late` bookkeeping around each delivery (the unacked index on receipt, its removal
on ack). redis-py's client constructor fills a table of some hundreds of response callbacks,
so that was about a tenth of an agent worker's CPU under load (py-spy, blocking sends at 16
clients). A `redis.Redis` is safe to share between threads (each command takes a connection
from the pool), so the channel keeps one, made again whenever kombu replaces the channel's pool
(after a fork, on reconnection). The queue, the acknowledgements, the visibility timeout and
the polling are kombu's.
"""

from __future__ import annotations

import logging
import os
import uuid
from datetime import UTC, datetime, timedelta
from time import monotonic
from typing import Any

from kombu.transport import TRANSPORT_ALIASES, filesystem, redis
from kombu.utils.json import dumps

logger = logging.getLogger(__name__)


class Channel(filesystem.Channel):
    def queue_bind(
        self, queue: str, exchange: str | None = None, routing_key: str = "", arguments=None, **kw
    ) -> None:
        exchange = exchange or "amq.direct"
        if not self.state.has_binding(queue, exchange, routing_key):
            super().queue_bind(queue, exchange, routing_key, arguments, **kw)
            return
        # Recorded by this process, perhaps by a thread still writing it: write it here too
        # (idempotent, under the table's lock) so nothing is published before the table has it.
        meta = self.typeof(exchange).prepare_bind(queue, exchange, routing_key, arguments)
        self._queue_bind(exchange, *meta)

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + ".partial"  # not "<queue>.msg": consumers skip it
        try:
            with open(partial, "wb") as f:
                f.write(dumps(payload).encode())
                f.flush()
                os.fsync(f.fileno())
            os.replace(partial, final)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        table = self._exchange_file(exchange)
        self.control_folder.mkdir(exist_ok=True)
        if not table.exists():
            entry = [filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")]
            partial = table.with_name(f"{table.name}.{uuid.uuid4().hex}.partial")
            partial.write_bytes(dumps(entry).encode())
            try:
                os.link(partial, table)  # the table appears whole, or another bind made it
                return
            except FileExistsError:
                pass  # then add to it, under kombu's lock, as kombu does
            finally:
                partial.unlink(missing_ok=True)
        super()._queue_bind(exchange, routing_key, pattern, queue)


class Transport(filesystem.Transport):
    Channel = Channel


class RedisChannel(redis.Channel):
    _shared_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)
        client = self._shared_client
        if client is None or client.connection_pool is not self.pool:
            client = self._shared_client = super()._create_client()
        return client


class RedisTransport(redis.Transport):
    Channel = RedisChannel


def install() -> None:
    """Make `filesystem://` and `redis(s)://` broker URLs use these transports, in every
    process that loads Celery."""
    TRANSPORT_ALIASES["filesystem"] = "a2a_platform.broker:Transport"
    TRANSPORT_ALIASES["redis"] = TRANSPORT_ALIASES["rediss"] = "a2a_platform.broker:RedisTransport"


def started_at(timeout: float = 3.0) -> datetime | None:
    """When the broker's server last started (Redis: now less its uptime), so the reaper can
    queue again the runs queued before it (a restart may have lost them: tasks_app.services.
    tasks_requeue_lost_jobs). None for a broker that keeps its messages across restarts of
    the process using it (the filesystem), or when it cannot be asked now (it is down: the
    runs wait for it either way)."""
    from a2a_platform.celery import app

    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=timeout)
            client = getattr(connection.default_channel, "client", None)
            if client is None:
                return None
            uptime = client.info("server")["uptime_in_seconds"]
    except Exception as exc:  # the answer is "unknown", not an error of the reaper
        logger.warning("Cannot ask the broker when it started: %s", exc)
        return None
    return datetime.now(UTC) - timedelta(seconds=int(uptime))
