"""How many jobs wait in each Celery queue, read from the broker itself (Redis or the embedded
filesystem broker), for the operator dashboard and /metrics."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from django.conf import settings

from a2a_platform.celery import app

# kombu's Redis transport keeps a queue's messages in a list named after it, and messages with
# a priority in lists named `<queue>\x06\x16<priority>`.
_REDIS_PRIORITY_SEP = "\x06\x16"
_REDIS_PRIORITIES = (3, 6, 9)


T = TypeVar("T")


def within(seconds: float, read: Callable[[], T]) -> T:
    """`read()` on a thread of its own, or TimeoutError after `seconds`: a broker host that
    drops packets has no socket timeout, and a page or a scrape must not hang on it. A read
    that hangs is left to finish alone."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="broker-read")
    try:
        return pool.submit(read).result(timeout=seconds)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def queue_names() -> list[str]:
    names = {app.conf.task_default_queue}
    names.update(q.name for q in app.conf.task_queues or ())
    return sorted(names)


def queue_depths() -> dict[str, int]:
    """Messages waiting (not yet taken by a worker) per queue. Raises if the broker is down."""
    names = queue_names()
    url = settings.CELERY_BROKER_URL
    if url.startswith("filesystem://"):
        folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"]
        depths = dict.fromkeys(names, 0)
        for entry in os.listdir(folder):
            # `<time>_<uuid>.<queue>.msg`; files still being written end in `.partial`.
            queue = entry.partition(".")[2].removesuffix(".msg")
            if entry.endswith(".msg") and queue in depths:
                depths[queue] += 1
        return depths
    if not url.startswith(("redis://", "rediss://")):
        raise NotImplementedError(f"queue depth is not read from a {url.split(':')[0]} broker")
    with app.connection_for_read(url) as connection:
        connection.ensure_connection(max_retries=1)  # a broker that is down fails fast
        client = connection.default_channel.client
        return {
            name: sum(
                client.llen(key)
                for key in [name, *(f"{name}{_REDIS_PRIORITY_SEP}{p}" for p in _REDIS_PRIORITIES)]
            )
            for name in names
        }
