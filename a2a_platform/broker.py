"""kombu's filesystem broker with atomic writes, for the embedded profile.

kombu's filesystem transport writes a message file in place, and a consumer may pick it up
half written: the worker then fails to decode it, the message is gone, and the consumer stops.
This channel writes each message under a name the consumer ignores and renames it into place,
which is atomic, so a consumer sees a whole message or none.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
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


class Transport(filesystem.Transport):
    Channel = Channel


def install() -> None:
    """Make `filesystem://` broker URLs use this transport, in every process that loads Celery."""
    TRANSPORT_ALIASES["filesystem"] = "a2a_platform.broker:Transport"
