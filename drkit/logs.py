"""Structured logging set-up: key=value text for terminals, JSON lines for machines.

Call sites pass context with ``extra={"flow": ..., "topic": ...}``; those fields are rendered
with every line.  Never pass secrets: nothing here knows which values are sensitive.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


def _fields(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


# Control characters (C0, DEL, C1) as escapes: a group or topic name is anyone's text, and one
# holding a newline would forge a log line, one holding ESC would drive the reader's terminal.
_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))} | {
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
}


def printable(text: str) -> str:
    """``text`` with every control character escaped (one line, no terminal codes)."""
    return text.translate(_ESCAPES)


class TextFormatter(logging.Formatter):
    """One line per record (a traceback follows on lines of its own); names and messages
    escaped (:func:`printable`)."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC).strftime("%H:%M:%S")
        extra = " ".join(f"{k}={printable(str(v))}" for k, v in _fields(record).items())
        line = f"{when} {record.levelname:<7} {record.name}: {printable(record.getMessage())}"
        if extra:
            line += f"  {extra}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


_FORMAT = ["text"]  # set by configure(): what a line on stderr must look like


def json_lines() -> bool:
    """Whether stderr carries JSON lines (``--log-format json``): every line a command writes
    there must then be a log record, not plain text (see ``drkit.cli.context.say``)."""
    return _FORMAT[0] == "json"


def configure(level: int = logging.INFO, fmt: str = "text") -> None:
    """Install one stderr handler on the root logger (idempotent)."""
    _FORMAT[0] = fmt
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Third-party chatter that says nothing an operator acts on.
    for noisy in ("py4j", "apscheduler.executors", "alembic", "waitress"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    # "skipped: maximum number of running instances" on every overrun probe; drkit counts
    # overruns itself (drkit_monitor_task_failures_total{kind="timeout"}).
    logging.getLogger("apscheduler.scheduler").setLevel(max(level, logging.ERROR))


def dump_stacks_on_sigusr1() -> None:
    """``kill -USR1 <pid>`` prints every thread's Python stack to stderr (the log) and the
    process goes on: how an operator - or a test that gave up waiting - sees where a process
    that does not stop is waiting.  No-op where the signal does not exist (Windows)."""
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)


def log_tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a daemon's log file ("" when it is missing or unreadable),
    for error messages that name why a process died."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
