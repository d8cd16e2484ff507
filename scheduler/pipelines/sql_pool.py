"""PostgreSQL connections that SqlSource and SqlSink keep open in a process between uses.

A worker catching up runs window after window against the same source and
sink; a new connection each time (a server process forked, authentication)
was a tenth of a window's time in the load benchmark (issue 25). A
connection is reset (`DISCARD ALL`: settings, temporary tables, cursors) when
it is taken again, which also checks it answers, so a server that restarted
meanwhile costs a reconnect, not a failed run: one round trip, not two. Only
an idle connection comes back; one left in a transaction or broken is closed.
Keyed by process id, so a forked worker never uses its parent's socket.
"""
from __future__ import annotations

import logging
import os
from typing import Any

log = logging.getLogger(__name__)
MAX_IDLE = 2  # per URL and process: a source and a sink


def take(url: str) -> Any | None:
    """An idle connection to `url`, reset, that answers; or None."""
    idle = _idle.get((os.getpid(), url))
    while idle:
        conn = idle.pop()
        try:
            conn.execute("DISCARD ALL")  # the reset is the check: one round trip
            return conn
        except Exception:
            _close(conn)
    return None


def give_back(url: str, conn: Any) -> None:
    """Keep `conn` for the next use if it is idle; else close it."""
    idle = _idle.setdefault((os.getpid(), url), [])
    if conn.closed or conn.broken or len(idle) >= MAX_IDLE or conn.info.transaction_status != _IDLE:
        _close(conn)
        return
    idle.append(conn)


def _close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:
        log.debug("closing a pooled connection failed", exc_info=True)


_idle: dict[tuple[int, str], list[Any]] = {}
_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE
