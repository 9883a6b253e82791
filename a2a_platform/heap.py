"""The objects a long-running process loads at start-up, out of the garbage collector's way.

A web process holds about 200,000 objects once Django, the protocol types and the URL patterns
are loaded. Python's full (generation 2) collection walks every one of them: about 115 ms on the
2-core development machine, every few seconds under load, and every request of the process
waits for it (the 130-150 ms ListTasks and GetTask outliers of docs/benchmarks.md). Those
objects live as long as the process, so collecting them only costs time. `gc.freeze()` moves
them to a permanent generation that collections skip; objects made later are collected as
before. daphne's processes, the gRPC sidecar and the Celery workers call `freeze()` once they
are ready to serve.
"""

from __future__ import annotations

import gc
import logging

logger = logging.getLogger(__name__)


def freeze(process: str) -> int:
    """Collect what start-up left behind, then freeze every object alive; returns how many
    objects are frozen."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    logger.info(
        "%s: %d objects loaded at start-up frozen out of garbage collection", process, frozen
    )
    return frozen
