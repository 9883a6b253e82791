"""What the logs leave out below DEBUG (settings.LOGGING): lines that repeat every few seconds
and say nothing, so that one line is left per request or job at most, and what is left is worth
reading."""

from __future__ import annotations

import logging
from collections.abc import Iterable


class Housekeeping(logging.Filter):
    """Drops two kinds of line:

    - the outcome, below WARNING, of the jobs beat sends on a timer (`periodic_tasks`: the
      reaper and the push dispatcher, every 5 and 15 s). Celery logs every job's success at
      INFO; a failure of theirs is logged at ERROR, and kept.
    - kombu's warning that the broker URL names no host, on every connection of the embedded
      profile's `filesystem://` broker, which has none to name.
    """

    def __init__(self, periodic_tasks: Iterable[str] = ()) -> None:
        super().__init__()
        self.periodic_tasks = frozenset(periodic_tasks)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "celery.app.trace" and record.levelno < logging.WARNING:
            # Celery passes the job's fields as the format's mapping: name, id, runtime...
            job = record.args
            return not (isinstance(job, dict) and job.get("name") in self.periodic_tasks)
        if record.name == "kombu.connection":
            return not str(record.msg).startswith("No hostname was supplied")
        return True
