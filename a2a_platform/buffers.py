"""Per-process buffers that hot paths add to without I/O, written to the database by a thread.

A `Buffer` holds entries merged per key under a lock (a dict update per call). A daemon thread,
started with the first entry, writes them every `interval()` seconds (one `write(batch)` per
interval, however busy the process is); they are written also when the process exits (atexit:
after a web process's or the sidecar's drain, which ends with the process) and when a Celery
worker stops (its warm shutdown begins a write at once; its end, once the runs are over, writes
what they added since). What the usage meter (agents.usage) and the refused credentials of the
audit log (audit.failures) count goes through one of these.

What is lost: a process killed outright loses at most one interval. A write that fails for the
database (away, or its table not migrated yet in a rolling upgrade) keeps its entries for the
next one; one that fails for its data (a `DataError`: a value no column holds) drops them, as
they never will be written. With `max_keys`, a new key past that many pending is dropped and
counted (`dropped`), so the buffer stays bounded whatever the callers send.
"""

from __future__ import annotations

import atexit
import copy
import logging
import os
import threading
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

from celery.signals import worker_shutdown, worker_shutting_down
from django.db import DataError, connection

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
E = TypeVar("E")


class Buffer(Generic[K, E]):
    """A process's entries and their writing. Subclasses say how two entries of a key merge
    (`combine`), how a batch is written (`write`) and how often (`interval`). A process-wide
    buffer (one per process, `process_wide=True`) is written when the process exits or its
    worker stops, and forgotten in a forked child (its parent writes it); tests make their own,
    written by hand (`background=False`)."""

    # Names for the thread (`a2a-<name>`) and the log lines ("<label>: the counts of 3 <what>").
    name = "buffer"
    label = "Buffer"
    what = "keys"

    def __init__(
        self, *, background: bool = True, process_wide: bool = False, max_keys: int | None = None
    ) -> None:
        self.background = background
        self.process_wide = process_wide
        self.max_keys = max_keys
        self._lock = threading.Lock()
        self._pending: dict[K, E] = {}
        self._dropped = 0
        # One write at a time: the exit's write waits for the thread's, so nothing it holds is
        # dropped with the interpreter.
        self._flushing = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        if process_wide:
            _PROCESS_WIDE.append(self)
            os.register_at_fork(after_in_child=self.forget)

    # --- what a subclass says ---------------------------------------------------------------

    def interval(self) -> float:
        """Seconds between the thread's writes (read before each wait)."""
        raise NotImplementedError

    def combine(self, entry: E, more: E) -> E:
        """`more` merged into `entry` (of the same key); may change `entry` and return it."""
        raise NotImplementedError

    def write(self, batch: dict[K, E]) -> None:
        """Write the batch to the database, whole or not at all (raising)."""
        raise NotImplementedError

    # --- adding -------------------------------------------------------------------------------

    def add(self, key: K, entry: E) -> bool:
        """Merge `entry` into the key's: no I/O, a lock held for a dict update. `entry` is the
        buffer's from now on. False (counted in `dropped`) when the key is new and the buffer
        already holds `max_keys`."""
        with self._lock:
            held = self._pending.get(key)
            if held is not None:
                self._pending[key] = self.combine(held, entry)
            elif self.max_keys is not None and len(self._pending) >= self.max_keys:
                self._dropped += 1
                return False
            else:
                self._pending[key] = entry
        if self._thread is None and self.background:
            self._start()
        return True

    def pending(self) -> dict[K, E]:
        """A copy of the entries not yet written."""
        with self._lock:
            return copy.deepcopy(self._pending)

    @property
    def dropped(self) -> int:
        """Additions dropped since the last write because the buffer was full."""
        return self._dropped

    # --- writing ------------------------------------------------------------------------------

    def flush(self) -> bool:
        """Write the buffer; False (the entries kept for the next write) if it could not be."""
        with self._flushing:
            with self._lock:
                batch, self._pending = self._pending, {}
                dropped, self._dropped = self._dropped, 0
            if dropped:
                logger.warning(
                    "%s: %d additions were dropped: the buffer held %s %s already",
                    self.label,
                    dropped,
                    self.max_keys,
                    self.what,
                )
            if not batch:
                return True
            try:
                self.write(batch)
            except DataError:
                # A value no column can hold: it never will, and must not stop the others.
                logger.exception(
                    "%s: the counts of %d %s are dropped", self.label, len(batch), self.what
                )
                return False
            except Exception as exc:
                # The database away, or not migrated yet (a rolling upgrade): the entries wait.
                first_line = (str(exc).strip().splitlines() or [""])[0][:300]
                logger.warning(
                    "%s: the counts of %d %s are kept for the next flush: %s: %s",
                    self.label,
                    len(batch),
                    self.what,
                    type(exc).__name__,
                    first_line,
                )
                self._merge(batch)
                return False
            return True

    def flush_soon(self) -> None:
        """Have the thread write now, without waiting for it (safe in a signal handler)."""
        self._wake.set()

    def forget(self) -> None:
        """Drop the buffer: a forked child's copy is its parent's to write."""
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._pending = {}
        self._dropped = 0
        self._wake = threading.Event()
        self._thread = None

    def _merge(self, batch: dict[K, E]) -> None:
        """Put back a batch that could not be written (within `max_keys`, as `add` does)."""
        with self._lock:
            for key, entry in batch.items():
                held = self._pending.get(key)
                if held is not None:
                    self._pending[key] = self.combine(entry, held)
                elif self.max_keys is not None and len(self._pending) >= self.max_keys:
                    self._dropped += 1
                else:
                    self._pending[key] = entry

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(
                target=self._serve, name=f"a2a-{self.name}", daemon=True
            )
        self._thread.start()
        if self.process_wide:
            _hooks_install()

    def _serve(self) -> None:
        while True:
            self._wake.wait(self.interval())
            self._wake.clear()
            try:
                self.flush()
            except Exception:  # never let the thread die: the next interval tries again
                logger.exception("%s: flush failed", self.label)
            finally:
                # The thread's connection goes back to the pool (or closes) between writes,
                # as the database threads' do after each call.
                connection.close()


# The buffers written at exit and when a worker stops: each process's own (`process_wide`).
_PROCESS_WIDE: list[Buffer[Any, Any]] = []


def _flush_at_exit() -> None:
    for buffer in _PROCESS_WIDE:
        if buffer.pending() or buffer.dropped:
            buffer.flush()


_installed = False


def _hooks_install() -> None:
    """Write when the process ends, and when a Celery worker stops (once a process-wide buffer
    of this process holds something)."""
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(_flush_at_exit)
    # Warm shutdown begins in Celery's signal handler: the threads write, the handler waits
    # for nothing. Its end (runs over, or handed back) writes what they added since.
    worker_shutting_down.connect(_on_worker_stopping, weak=False)
    worker_shutdown.connect(_on_worker_stopped, weak=False)


def _on_worker_stopping(**_: Any) -> None:
    for buffer in _PROCESS_WIDE:
        buffer.flush_soon()


def _on_worker_stopped(**_: Any) -> None:
    for buffer in _PROCESS_WIDE:
        buffer.flush()
