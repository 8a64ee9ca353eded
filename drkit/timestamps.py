"""How drkit writes a moment in its JSON documents: ISO-8601 UTC to the millisecond, ``Z``.

One format for every document (``-o json``, ``/api/status``, drill reports, run documents), so
a script never guesses between epoch seconds, epoch milliseconds and local times.  The state
store hands back naive datetimes (SQLite keeps no zone); drkit only ever stores UTC, so a naive
value is read as UTC, never as the machine's local time.
"""

from __future__ import annotations

from datetime import UTC, datetime


def iso_utc(moment: datetime | float) -> str:
    """``moment`` (a datetime - naive means UTC - or epoch seconds) as ``...T15:02:19.123Z``."""
    if isinstance(moment, datetime):
        at = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    else:
        at = datetime.fromtimestamp(moment, UTC)
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_or_none(moment: datetime | float | None) -> str | None:
    """:func:`iso_utc`, with ``None`` (never happened, unknown) kept as ``None``."""
    return None if moment is None else iso_utc(moment)


def iso_text(value: str | None) -> str | None:
    """An ISO-8601 string written before this format (``+00:00``, microseconds) in this one."""
    return None if value is None else iso_utc(datetime.fromisoformat(value))
