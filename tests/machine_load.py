"""How busy the machine was while each test ran: wait-bound tests show up as idle.

The ten slowest tests are printed with the share of the machine's CPU that was busy during
them (all processes: brokers, Spark, drkit's children).  A slow test on an idle machine waits
(timeouts, fixed phases, polling) - the place to look for time; a slow test on a busy machine
computes.  With ``DRKIT_TEST_TIMES=FILE`` every test's row is appended to FILE (tab-separated:
phase, test id, seconds, busy share).  Linux only (/proc/stat); elsewhere nothing is printed.

With ``DRKIT_TEST_CPU=FILE`` each phase's CPU seconds of the whole process tree it caused are
measured too (tests/cpu_tree.py: this process, its children, the test brokers - by kind),
printed for every test at the end and appended to FILE (tab-separated: phase, test id, wall
seconds, then ``kind=seconds`` fields).  Measure one test process at a time: a sampler thread
reads /proc twice a second, and the brokers' time counts for whichever test runs.

Under pytest-xdist each test process measures its own tests and hands the busy share to the
controller on the test's report (``user_properties``), which prints and writes every row.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cpu_tree import TreeCpu, describe


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
_CPU = "tree-cpu-"  # the same for the CPU of the phase's process tree (DRKIT_TEST_CPU)


class MachineLoad:
    """The pytest plugin (registered by tests/conftest.py)."""

    def __init__(self, keeps_rows: bool = True) -> None:
        self.rows: list[Timed] = []
        self.out = os.environ.get("DRKIT_TEST_TIMES")
        # An xdist worker only measures: its reports reach the controller, which keeps the rows
        # (a worker that kept them too wrote every row twice).
        self.keeps_rows = keeps_rows
        self.cpu_out = os.environ.get("DRKIT_TEST_CPU")
        self.cpu_rows: list[tuple[str, str, float, dict[str, float]]] = []

    def _timed(self, phase: str, item: pytest.Item) -> Iterator[None]:
        before = cpu_ticks()
        tree = None
        if self.cpu_out:
            from tests.kafka_backends import state_dir_for_tests

            tree = TreeCpu(state_dir_for_tests())
            tree.start()
        try:
            yield  # raises when the phase failed: its row is kept all the same
        finally:
            if tree is not None:
                item.user_properties.append((f"{_CPU}{phase}", tree.stop()))
            after = cpu_ticks()
            if before is not None and after is not None and after[1] > before[1]:
                busy = (after[0] - before[0]) / (after[1] - before[1])
                item.user_properties.append((f"{_BUSY}{phase}", busy))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep the row of a setup or call phase (here or, under xdist, in the controller)."""
        if not self.keeps_rows or report.when not in ("setup", "call", "teardown"):
            return
        self._keep_cpu(report)
        if report.when == "teardown":
            return
        value = dict(report.user_properties).get(f"{_BUSY}{report.when}")
        busy = float(value) if isinstance(value, float) else None
        row = Timed(report.when, report.nodeid, report.duration, busy)
        self.rows.append(row)
        if self.out:
            with Path(self.out).open("a", encoding="utf-8") as f:
                shown = "" if busy is None else f"{busy:.2f}"
                f.write(f"{row.phase}\t{row.test}\t{row.seconds:.2f}\t{shown}\n")

    def _keep_cpu(self, report: pytest.TestReport) -> None:
        cpu = dict(report.user_properties).get(f"{_CPU}{report.when}")
        if not isinstance(cpu, dict):
            return
        self.cpu_rows.append((report.when, report.nodeid, report.duration, cpu))
        if self.cpu_out:
            fields = "\t".join(f"{k}={v:.2f}" for k, v in sorted(cpu.items()))
            with Path(self.cpu_out).open("a", encoding="utf-8") as f:
                f.write(f"{report.when}\t{report.nodeid}\t{report.duration:.2f}\t{fields}\n")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        yield from self._timed("setup", item)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        yield from self._timed("call", item)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        if not self.cpu_out:
            return (yield)
        yield from self._timed("teardown", item)
        return None

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        self._cpu_summary(terminalreporter)
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

    def _cpu_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.cpu_rows:
            return
        terminalreporter.section("CPU seconds of each test's process tree and brokers")
        per_test: dict[str, dict[str, float]] = {}
        for _phase, test, _seconds, cpu in self.cpu_rows:
            summed = per_test.setdefault(test, {})
            for kind, value in cpu.items():
                summed[kind] = summed.get(kind, 0.0) + value
        for test, cpu in sorted(per_test.items(), key=lambda kv: -kv[1].get("total", 0.0)):
            terminalreporter.write_line(f"{describe(cpu)}  {test}")
        terminalreporter.write_line(
            f"all {len(per_test)} tests: {sum(c.get('total', 0.0) for c in per_test.values()):.0f}"
            " CPU seconds"
        )
