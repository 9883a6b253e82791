"""Django's PostgreSQL backend, with one addition: a connection taken from the pool that the
server ended while it sat there is put back (and so discarded) and another taken.

When PostgreSQL restarts or fails over, it ends every session, idle ones in the pools included;
each dead pooled connection would then fail the first request, stream read or run write given
it, one after another. psycopg_pool's own check (`ConnectionPool.check_connection`, Django's
`CONN_HEALTH_CHECKS`) is a round trip on every checkout, which the benchmark saw cost a single
client's GetTasks about a tenth of their rate (docs/benchmarks.md, "A PostgreSQL restart"). An
ended session needs no round trip to be seen: the server's last words (an ErrorResponse, then
the end of the stream) wait on an idle connection's socket, where nothing else arrives while
the connection is idle and not listening. So the check is a poll of the socket, without
waiting (docs/decisions.md, "A PostgreSQL restart").
"""

from __future__ import annotations

import logging
import select
from typing import Any

from django.db.backends.postgresql import base

logger = logging.getLogger(__name__)


def ended_while_idle(connection: Any) -> bool:
    """Whether the server has spoken on this idle connection (it ended the session)."""
    if connection.closed or connection.broken:
        return True
    poller = select.poll()
    poller.register(connection.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        connection = super().get_new_connection(conn_params)
        # Every pooled connection may be dead after a restart: at most the pool's size of them.
        for _ in range(self.pool.max_size if self.pool is not None else 0):
            if not ended_while_idle(connection):
                break
            logger.debug("A pooled database connection was ended by the server; taking another")
            connection.close()
            self.pool.putconn(connection)  # a closed connection is dropped, a new one made
            connection = super().get_new_connection(conn_params)
        return connection
