"""The state store's clock: one time every drkit process judges leases and ages by.

Hosts' clocks differ (NTP steps, a paused VM, a skewed laptop); a lease written with one
machine's ``now()`` and judged with another's lets a monitor whose clock runs ahead take over a
live engine.  Everything that compares a stored time with "now" - lease expiry, a worker's or an
observer's last report - reads "now" from the database instead:

* PostgreSQL: the server's ``clock_timestamp()`` - one clock for every client, wherever it runs.
* SQLite: ``strftime('now')``, evaluated in the calling process.  A SQLite store is one host's
  file, so every process reads the same kernel clock; only a tool that lies to one process
  (libfaketime) can make them disagree.  Engines and monitors on different hosts need PostgreSQL.

Durations a process measures for itself (how long its own lease surely lasts, budgets, timeouts)
use its monotonic clock, never this one.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import text
from sqlalchemy.orm import Session


def database_now(session: Session) -> datetime:
    """The database's current time, UTC-aware (not the transaction's start time)."""
    simulated = session.info.get("now")
    if simulated is not None:
        return simulated()  # type: ignore[no-any-return]
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        value = session.execute(text("SELECT clock_timestamp()")).scalar_one()
        return value.astimezone(UTC)  # type: ignore[no-any-return]
    if dialect == "sqlite":
        raw = session.execute(text("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")).scalar_one()
        return datetime.strptime(raw, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)
    return datetime.now(UTC)
