"""Benchmark: how fast every cluster-contacting drkit command fails when the clusters are bad.

Issue 45, "errors in seconds": every error within 3 s of the command's start.  Each fault kind is
built here, in-process, on loopback - no broker runs:

- ``refused``: a free port nobody listens on;
- ``unresolvable``: a host name under ``.invalid`` (RFC 2606: never resolves);
- ``hung``: a listener that accepts and never answers (the sockets stay open);
- ``not-kafka``: a listener that answers HTTP 400 to the first bytes, then closes;
- ``tls-mismatch``: a listener that answers a TLS alert (a TLS-only port spoken to in PLAINTEXT).

Both dc1 and dc2 get the fault (a flow dc1->dc2, a SQLite store upgraded before the timings),
each case in its own temp dir and ``--state-dir``.  Each command runs as a subprocess (the
installed ``drkit``), ``--repeat`` times (once when it does not exit within the 30 s timeout);
wall time from process start to exit, exit code, and what it said (:func:`last_line`; each row's
last run in full in bench/out/latest-errors-output.txt).  A row is "within 3 s" when every run
exited within 3 s with no traceback.  Anchor (same run): ``drkit --version`` and
``drkit config validate`` of a good config - the process start cost every row pays.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import OUT, markdown_table

LIMIT_S = 3.0
TIMEOUT_S = 30.0
FAULTS = ("refused", "unresolvable", "hung", "not-kafka", "tls-mismatch")

# (name shown, arguments after --state-dir; "{config}" is the case's config file)
COMMANDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("clusters check", ("clusters", "check")),
    ("doctor", ("doctor",)),
    ("status", ("status",)),
    ("groups lag", ("groups", "lag", "--cluster", "dc1")),
    (
        "offsets translate",
        ("offsets", "translate", "--group", "g1", "--from", "dc1", "--to", "dc2"),
    ),
    ("acls --apply", ("acls", "--role", "replicator", "--cluster", "dc2", "--apply", "--yes")),
    ("verify", ("verify", "--flow", "dc1->dc2")),
    # A Spark master nobody listens on, named before the clusters (Spark itself gives up after
    # ~80 s): the speed tests/unit/test_cli.py claimed until issue 51.
    (
        "verify --spark-master",
        ("verify", "--flow", "dc1->dc2", "--spark-master", "spark://127.0.0.1:1"),
    ),
    ("replicate", ("replicate",)),
    ("checkpoint", ("checkpoint",)),
    ("failover --plan", ("failover", "--from", "dc1", "--to", "dc2", "--plan")),
    ("switchover --plan", ("switchover", "--from", "dc1", "--to", "dc2", "--plan")),
    ("cutover --plan", ("cutover", "--from", "dc1", "--to", "dc2", "--plan")),
    ("failback --plan", ("failback", "--to", "dc1", "--plan")),
    ("drill readiness", ("drill", "readiness", "--from", "dc1", "--to", "dc2")),
    ("drill run", ("drill", "run", "planned-switchover", "--skip-verify")),
    ("flows list", ("flows", "list")),
    ("fences list", ("fences", "list")),
    ("pointer show", ("pointer", "show")),
)


# -- the fault listeners ---------------------------------------------------------------------


def _hung(connection: socket.socket, held: list[socket.socket]) -> None:
    """Accept and never answer: the socket is kept open until the listener closes."""
    held.append(connection)


def _http(connection: socket.socket, _held: list[socket.socket]) -> None:
    connection.settimeout(2)
    try:
        connection.recv(64)
        connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    except OSError:
        pass
    finally:
        connection.close()


def _tls(connection: socket.socket, _held: list[socket.socket]) -> None:
    connection.settimeout(2)
    try:
        connection.recv(64)
        connection.sendall(b"\x15\x03\x03\x00\x02\x02\x32")  # TLS alert: decode_error
    except OSError:
        pass
    finally:
        connection.close()


ANSWERS: dict[str, Callable[[socket.socket, list[socket.socket]], None]] = {
    "hung": _hung,
    "not-kafka": _http,
    "tls-mismatch": _tls,
}


@contextmanager
def listener(answer: Callable[[socket.socket, list[socket.socket]], None]) -> Iterator[int]:
    """A TCP listener on 127.0.0.1 handing each connection to ``answer``; yields its port."""
    server = socket.create_server(("127.0.0.1", 0), backlog=128)
    server.settimeout(0.1)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=answer, args=(connection, held), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        server.close()
        for connection in held:
            connection.close()


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def fault_addresses(fault: str) -> Iterator[tuple[str, str]]:
    """(dc1, dc2) bootstrap addresses that both show ``fault``, valid inside the block."""
    if fault == "refused":
        yield f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    elif fault == "unresolvable":
        yield "nosuch-dc1.invalid:9092", "nosuch-dc2.invalid:9092"
    elif fault in ANSWERS:
        with listener(ANSWERS[fault]) as one, listener(ANSWERS[fault]) as two:
            yield f"127.0.0.1:{one}", f"127.0.0.1:{two}"
    else:
        raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")


def write_config(directory: Path, dc1: str, dc2: str) -> Path:
    """drkit.yaml for dc1 -> dc2 (replicator principals, ACL fencing), a SQLite store beside it."""
    path = directory / "drkit.yaml"
    path.write_text(
        "clusters:\n"
        f"  dc1: {{bootstrap_servers: '{dc1}', principals: {{replicator: 'User:r'}}}}\n"
        f"  dc2: {{bootstrap_servers: '{dc2}', principals: {{replicator: 'User:r'}}}}\n"
        "flows: [{source: dc1, target: dc2}]\n"
        "failover: {fence_with_acls: true}\n"
        f"state_store: {{url: 'sqlite:///{directory / 'drkit.db'}'}}\n"
    )
    return path


# -- running and measuring -------------------------------------------------------------------


@dataclass
class Sample:
    seconds: float
    exit_code: int | None  # None: did not exit within the timeout (killed)
    message: str
    traceback: bool
    output: str = ""  # stdout and stderr in full, for the details file


@dataclass
class Row:
    command: str
    fault: str
    samples: list[Sample] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(s.seconds for s in self.samples)

    @property
    def worst(self) -> float:
        return max(s.seconds for s in self.samples)

    @property
    def exited(self) -> bool:
        return all(s.exit_code is not None for s in self.samples)

    @property
    def exit_codes(self) -> str:
        codes = sorted(
            {"no exit" if s.exit_code is None else str(s.exit_code) for s in self.samples}
        )
        return "/".join(codes) + ("" if self.exited else f" ({len(self.samples)} run)")

    @property
    def traceback(self) -> bool:
        return any(s.traceback for s in self.samples)

    @property
    def within(self) -> bool:
        """Every error within 3 s: the median and the worst run, an exit, no traceback."""
        return self.exited and not self.traceback and self.worst <= LIMIT_S

    @property
    def message(self) -> str:
        return self.samples[-1].message


def drkit_executable() -> str:
    beside = Path(sys.executable).parent / "drkit"
    return str(beside) if beside.exists() else (shutil.which("drkit") or "drkit")


_LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
_CAUSE = re.compile(r"unreachable|does not answer|not Kafka|TLS|refus|resolv|timed out")
_VERDICT = re.compile(r"BLOCKER|FAIL|failed|error")


def last_line(stderr: str, stdout: str) -> str:
    """What the command said, at most 120 characters: its last ``error:`` line on stderr; else
    the first line (stdout, then stderr's non-log lines) naming a cause, then one naming a
    failure; else the last plain line of stderr or stdout; else the last log line."""
    said = [line.strip() for line in stderr.splitlines() if line.strip()]
    plain = [line for line in said if not _LOG_LINE.match(line)]
    out = [line.strip() for line in stdout.splitlines() if line.strip()]
    errors = [line for line in plain if line.startswith("error:")]
    if errors:
        return errors[-1][:120]
    for pattern in (_CAUSE, _VERDICT):
        named = [line for line in out + plain if pattern.search(line)]
        if named:
            return named[0][:120]
    for lines in (plain, out, said):
        if lines:
            return lines[-1][:120]
    return ""


def run_once(argv: Sequence[str], timeout_s: float = TIMEOUT_S) -> Sample:
    """Run ``argv`` in its own session; on the timeout its whole process group is killed."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("NO_COLOR", "1")
    started = time.monotonic()
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        code = None
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
    took = time.monotonic() - started
    if code is None:
        message = f"(no exit within {timeout_s:.0f} s) " + last_line(stderr, stdout)
    else:
        message = last_line(stderr, stdout)
    output = f"$ {' '.join(argv)}\n--- stdout\n{stdout}--- stderr\n{stderr}"
    traceback = "Traceback" in stderr or "Traceback" in stdout
    return Sample(took, code, message[:120], traceback, output)


def anchors(drkit: str, repeat: int, scratch: Path) -> dict[str, float]:
    """Median seconds of ``drkit --version`` and of validating a good config."""
    good = scratch / "good"
    good.mkdir()
    config = write_config(good, "127.0.0.1:9092", "127.0.0.1:9093")
    out: dict[str, float] = {}
    for name, argv in (
        ("drkit --version", [drkit, "--version"]),
        ("drkit config validate", [drkit, "config", "validate", str(config)]),
    ):
        samples = [run_once(argv) for _ in range(repeat)]
        bad = [s for s in samples if s.exit_code != 0]
        if bad:
            raise RuntimeError(f"anchor {name} failed: {bad[0].message}")
        out[name] = statistics.median(s.seconds for s in samples)
    return out


def measure(
    drkit: str,
    faults: Sequence[str],
    commands: Sequence[tuple[str, tuple[str, ...]]],
    repeat: int,
    scratch: Path,
    timeout_s: float = TIMEOUT_S,
    progress: Callable[[Row], None] | None = None,
) -> list[Row]:
    store = upgraded_store(drkit, scratch)
    rows: list[Row] = []
    for fault in faults:
        with fault_addresses(fault) as (dc1, dc2):
            for name, args in commands:
                row = Row(name, fault)
                for attempt in range(repeat):
                    case = scratch / f"{fault}-{name.replace(' ', '_')}-{attempt}"
                    case.mkdir()
                    config = write_config(case, dc1, dc2)
                    shutil.copyfile(store, case / "drkit.db")
                    (case / "drkit.db").chmod(0o600)  # as drkit makes it: no "made private"
                    base = [drkit, "--state-dir", str(case / "state")]
                    sample = run_once([*base, *args, "--config", str(config)], timeout_s)
                    row.samples.append(sample)
                    if sample.exit_code is None:
                        break  # one run that does not exit tells it; no need to wait again
                rows.append(row)
                if progress is not None:
                    progress(row)
    return rows


def upgraded_store(drkit: str, scratch: Path) -> Path:
    """A SQLite store at the newest revision, copied into each case so no timing pays for it."""
    template = scratch / "template"
    template.mkdir()
    config = write_config(template, "127.0.0.1:9092", "127.0.0.1:9093")
    argv = [drkit, "--state-dir", str(template / "state"), "db", "upgrade", "--config", str(config)]
    done = run_once(argv, 60)
    if done.exit_code != 0:
        raise RuntimeError(f"drkit db upgrade failed: {done.message}")
    return template / "drkit.db"


# -- the report ------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(
    rows: Sequence[Row],
    anchor: dict[str, float],
    load_start: tuple[float, float, float],
    load_end: tuple[float, float, float],
    cpus: int,
    repeat: int,
) -> str:
    """The markdown table and its summary lines."""
    start_cost = anchor.get("drkit config validate") or 0.0
    table = []
    for row in rows:
        ratio = f" ({row.median / start_cost:.1f}x)" if start_cost else ""
        table.append(
            [
                row.command,
                row.fault,
                f"{row.median:.2f}{ratio}",
                f"{row.worst:.2f}",
                row.exit_codes,
                "yes" if row.within else "**no**",
                _cell(("TRACEBACK: " if row.traceback else "") + row.message),
            ]
        )
    header = ["command", "fault", "median s (x start)", "max s", "exit", "within 3 s", "message"]
    over = [r for r in rows if not r.within]
    load = "/".join(f"{v:.2f}" for v in load_start), "/".join(f"{v:.2f}" for v in load_end)
    summary = [
        f"{len(rows)} rows ({repeat} runs each), {len(over)} not within {LIMIT_S:.0f} s"
        + (
            ": " + ", ".join(f"{r.command} [{r.fault}] {r.worst:.1f} s" for r in over)
            if over
            else ""
        )
        + f"; {sum(r.traceback for r in rows)} with a traceback;"
        + f" {sum(not r.exited for r in rows)} did not exit within {TIMEOUT_S:.0f} s.",
        "Anchor (process start, same run): "
        + ", ".join(f"`{name}` {seconds:.2f} s" for name, seconds in anchor.items())
        + ".",
        f"Load average (1/5/15 min) at the start {load[0]}, at the end {load[1]}; {cpus} CPUs.",
    ]
    return (
        "### Errors in seconds: every cluster-contacting command, dc1 and dc2 both bad\n\n"
        + markdown_table(header, table)
        + "\n\n"
        + "\n".join(f"- {line}" for line in summary)
    )


def main(
    repeat: int = 3,
    faults: Sequence[str] = FAULTS,
    only: Sequence[str] | None = None,
    timeout_s: float = TIMEOUT_S,
) -> str:
    drkit = drkit_executable()
    commands = [c for c in COMMANDS if not only or c[0] in only]
    if not commands:
        raise SystemExit(f"no such command; known: {', '.join(c[0] for c in COMMANDS)}")
    cpus = os.cpu_count() or 1
    load_start = os.getloadavg()
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="drkit-bench-err-")))
        anchor = anchors(drkit, repeat, scratch)
        print(f"  anchor: {anchor}", flush=True)

        def progress(row: Row) -> None:
            print(
                f"  {row.command} [{row.fault}]: median {row.median:.2f} s, max {row.worst:.2f} s,"
                f" exit {row.exit_codes}: {row.message}",
                flush=True,
            )

        rows = measure(drkit, faults, commands, repeat, scratch, timeout_s, progress)
    OUT.mkdir(parents=True, exist_ok=True)
    details = OUT / "latest-errors-output.txt"
    details.write_text(
        "".join(
            f"=== {r.command} [{r.fault}] exit {r.exit_codes}\n{r.samples[-1].output}\n"
            for r in rows
        )
    )
    print(f"  each row's last run in full: {details}", flush=True)
    return render(rows, anchor, load_start, os.getloadavg(), cpus, repeat)
