"""How busy the machine was while each test ran: wait-bound tests show up as idle.

The ten slowest tests are printed with the share of the machine's CPU that was busy during
them (all processes: brokers, Spark, drkit's children).  A slow test on an idle machine waits
(timeouts, fixed phases, polling) - the place to look for time; a slow test on a busy machine
computes.  With ``DRKIT_TEST_TIMES=FILE`` every test's row is appended to FILE (tab-separated:
phase, test id, seconds, busy share).  Linux only (/proc/stat); elsewhere nothing is printed.

Under pytest-xdist each test process measures its own tests and hands the busy share to the
controller on the test's report (``user_properties``), which prints and writes every row.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Timed:
    phase: str
    test: str
    seconds: float
    busy: float | None  # share of all cores busy, 0..1; None: unknown


def cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies of all cores since boot, or None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    values = [int(v) for v in fields[:8]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


_BUSY = "machine-busy-"  # user property name prefix, one per phase


class MachineLoad:
    """The pytest plugin (registered by tests/conftest.py)."""

    def __init__(self, keeps_rows: bool = True) -> None:
        self.rows: list[Timed] = []
        self.out = os.environ.get("DRKIT_TEST_TIMES")
        # An xdist worker only measures: its reports reach the controller, which keeps the rows
        # (a worker that kept them too wrote every row twice).
        self.keeps_rows = keeps_rows

    def _timed(self, phase: str, item: pytest.Item) -> Iterator[None]:
        before = cpu_ticks()
        try:
            yield  # raises when the phase failed: its row is kept all the same
        finally:
            after = cpu_ticks()
            if before is not None and after is not None and after[1] > before[1]:
                busy = (after[0] - before[0]) / (after[1] - before[1])
                item.user_properties.append((f"{_BUSY}{phase}", busy))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep the row of a setup or call phase (here or, under xdist, in the controller)."""
        if not self.keeps_rows or report.when not in ("setup", "call"):
            return
        value = dict(report.user_properties).get(f"{_BUSY}{report.when}")
        busy = float(value) if isinstance(value, float) else None
        row = Timed(report.when, report.nodeid, report.duration, busy)
        self.rows.append(row)
        if self.out:
            with Path(self.out).open("a", encoding="utf-8") as f:
                shown = "" if busy is None else f"{busy:.2f}"
                f.write(f"{row.phase}\t{row.test}\t{row.seconds:.2f}\t{shown}\n")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        yield from self._timed("setup", item)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        yield from self._timed("call", item)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        known = [r for r in self.rows if r.busy is not None]
        if not known:
            return
        terminalreporter.section("ten slowest tests, and how busy the machine was")
        for row in sorted(known, key=lambda r: r.seconds, reverse=True)[:10]:
            terminalreporter.write_line(
                f"{row.seconds:8.2f}s {row.phase:5s} busy {row.busy:4.0%}  {row.test}"
            )
        total = sum(r.seconds for r in known)
        busy = sum(r.seconds * (r.busy or 0.0) for r in known) / total if total else 0.0
        terminalreporter.write_line(
            f"all {len(known)} timed phases: {total:.0f}s, the machine {busy:.0%} busy"
        )
