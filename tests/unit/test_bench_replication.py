"""bench/replication.py's and bench/common.py's pure parts for issue 50: CPU seconds read from
/proc stat lines and summed over a process tree, the window the per-core figure is taken over,
the pipe limit's bound and when a replicator makes it invalid, and how the table says both.
No broker, no replicator."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import bench.common
import bench.replication
from bench.__main__ import _replication_table
from bench.common import CpuWindow, stat_cpu_seconds, stat_fields, tree_cpu_seconds
from bench.replication import Result, beaten, pipe_bound, run

# A real stat line's shape; the command name holds a space and a ")" of its own.
STAT = (
    "4242 (python3 -m x) y) S 4200 4242 4200 0 -1 4194560 1500 0 0 0 "
    "250 75 30 5 20 0 3 0 12345 1000000 2000 18446744073709551615"
)


def test_a_stat_line_is_cut_after_the_command_name_and_its_cpu_fields_summed() -> None:
    fields = stat_fields(STAT)
    assert fields[:2] == ["S", "4200"]  # the state, then the parent pid
    # utime 250 + stime 75 + cutime 30 + cstime 5 ticks, at 100 ticks a second.
    assert stat_cpu_seconds(fields, 100) == pytest.approx(3.60)


# Burns CPU until the process has used ``{s}`` seconds of it (CPU time, not wall time: the same
# under any load), then says so and waits for its stdin to close.
BURN = (
    "import sys, time\n"
    "while time.process_time() < {s}: pass\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n"
)

# Has a child burn 0.4 s and reaps it, starts a second that burns 0.3 s and stays alive, then
# burns 0.1 s itself: 0.8 s of CPU in the tree.
TREE = f"""
import subprocess, sys
BURN = {BURN!r}
subprocess.run([sys.executable, "-c", BURN.format(s=0.4)], input="", capture_output=True)
alive = subprocess.Popen(
    [sys.executable, "-c", BURN.format(s=0.3)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
)
alive.stdout.readline()
exec(BURN.format(s=0.1))
"""


@pytest.fixture
def tree() -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, "-c", TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        yield process
    finally:
        process.kill()  # its live child reads EOF on its stdin and exits
        process.wait()


def test_a_trees_cpu_counts_live_descendants_and_the_children_it_reaped(
    tree: subprocess.Popen[str],
) -> None:
    # 0.8 s in the loops, less up to a clock tick per process (stat counts whole ticks).
    assert tree_cpu_seconds(tree.pid) >= 0.77
    assert tree_cpu_seconds(2**22 + 7) == 0.0  # above Linux's largest pid_max: no process


def test_the_window_counts_the_records_and_cpu_between_its_edges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    readings = iter([10.0, 12.5])
    monkeypatch.setattr(bench.common, "tree_cpu_seconds", lambda _pid: next(readings))
    window = CpuWindow(lambda: 1)
    window.open(1_000)  # the first records had arrived when the window opened
    window.close(51_000)
    assert (window.cpu_s, window.records) == (2.5, 50_000)
    assert window.per_cpu_second() == 20_000
    # Never opened, or no tick elapsed: no figure rather than a division by zero.
    assert CpuWindow(lambda: 1).per_cpu_second() is None
    flat = iter([3.0, 3.0])
    monkeypatch.setattr(bench.common, "tree_cpu_seconds", lambda _pid: next(flat))
    short = CpuWindow(lambda: 1)
    short.open(0)
    short.close(100)
    assert short.per_cpu_second() is None


def test_the_limit_is_the_slower_stage_unless_the_pipeline_went_faster() -> None:
    consume, produce = (900_000.0, "fetch 1 MiB"), (300_000.0, "1 producer")
    rate, name = pipe_bound(consume, produce, (250_000.0, "1 process"))
    assert rate == 300_000
    assert "bound by the stages" in name and "produce 300,000/s [1 producer]" in name
    rate, name = pipe_bound(consume, produce, (410_000.0, "2 processes"))
    assert rate == 410_000
    assert "bound by the pipeline" in name and "pipeline 410,000/s [2 processes]" in name


def test_only_a_replicator_faster_than_the_limit_beats_it() -> None:
    rows = [Result("a", 99.0, 0), Result("b", 100.0, 0), Result("c", 101.0, 0)]
    assert [r.name for r in beaten(100.0, rows)] == ["c"]


def _fake_clusters() -> Any:
    class Admin:
        def create_topics(self, _specs: object) -> None:
            pass

    class Clusters:
        dc1 = dc2 = None

        def admin(self, _which: str) -> Admin:
            return Admin()

    return Clusters()


def test_a_run_in_which_a_replicator_beat_that_runs_limit_marks_the_limit_invalid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Run 2's drkit beat run 2's limit; the medians (limit 300,000, drkit 290,000) do not show it.
    limits = iter([300_000.0, 250_000.0, 310_000.0])
    drkit = iter([280_000.0, 290_000.0, 295_000.0])
    monkeypatch.setattr(bench.replication, "producer_perf", lambda *a, **k: 0.0)
    monkeypatch.setattr(
        bench.replication, "pipe_limit", lambda *a: Result("pipe limit", next(limits), 0)
    )

    def timed(_clusters: object, replicator: Any, *_: object) -> Result:
        rate = next(drkit) if replicator.name.startswith("drkit") else 100_000.0
        return Result(replicator.name, rate, 0)

    monkeypatch.setattr(bench.replication, "throughput", timed)
    results = run(_fake_clusters(), 100, 1_000, workers=1, latency_seconds=0, repeat=3)
    assert results[0].records_per_s == 300_000
    assert results[0].beaten_by == ["drkit (1 worker) 290,000/s in run 2"]


def _table(limit: Result) -> str:
    rows = [
        limit,
        Result("MirrorMaker 2 defaults (tasks.max=1)", 100_000, 10, 1200, per_core=15_000, cores=1),
        Result("MirrorMaker 2 tuned (tasks.max=1)", 150_000, 15, 1200, per_core=20_000, cores=1),
        Result("drkit (1 worker)", 300_000, 30, 300, per_core=50_000, cores=0.95),
    ]
    return _replication_table(100, 1_000, rows, workers=1)


def test_the_table_gives_shares_of_a_valid_limit_and_per_core_ratios() -> None:
    table = _table(Result("pipe limit (x)", 400_000, 40))
    assert "INVALID" not in table
    assert "75% of pipe limit (MirrorMaker 2: 38%)" in table
    assert "| 50,000 (0.95 cores) |" in table
    assert (
        "- drkit (1 worker) / MirrorMaker 2 tuned (tasks.max=1) per core: "
        "2.50x (50,000 vs 20,000 records per CPU-second)"
    ) in table.splitlines()


def test_the_table_names_an_invalid_limit_and_gives_no_share_of_it() -> None:
    limit = Result("pipe limit (x)", 250_000, 25, beaten_by=["drkit (1 worker) 300,000/s in run 1"])
    table = _table(limit)
    assert "% of pipe limit" not in table
    first_row = table.splitlines()[4]
    assert first_row.startswith("| INVALID LIMIT (beaten by drkit (1 worker) 300,000/s in run 1)")
    ratio_lines = [line for line in table.splitlines() if "x throughput" in line]
    assert len(ratio_lines) == 2 and all("INVALID LIMIT" in line for line in ratio_lines)


def test_a_replicator_without_a_cpu_window_gets_no_per_core_figure() -> None:
    rows = [
        Result("pipe limit (x)", 400_000, 40),
        Result("MirrorMaker 2 defaults (tasks.max=1)", 100_000, 10),
        Result("MirrorMaker 2 tuned (tasks.max=1)", 150_000, 15),
        Result("drkit (1 worker)", 300_000, 30, per_core=50_000, cores=1),
    ]
    table = _replication_table(100, 1_000, rows, workers=1)
    assert "per core: no figure" in table


def test_a_candidate_whose_records_all_appeared_at_once_is_left_out_of_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("settle", "payload_pool"):
        monkeypatch.setattr(bench.replication, name, lambda *a, **k: None)
    monkeypatch.setattr(bench.replication, "consumer_perf", lambda *a, **k: 900_000.0)
    monkeypatch.setattr(bench.replication, "_produce_rate", lambda *a: (200_000.0, 0.0))
    windows = {"produce": 0.0, "pipeline": 0.5}  # the producers' records all showed at once

    def timed(_clusters: object, candidate: Any, *_: object) -> Result:
        window = windows[candidate.mode]
        rate = 1_000 / max(window, 1e-3)  # as throughput computes it: 1,000,000/s at once
        return Result(candidate.name, rate, 0, window_s=window)

    monkeypatch.setattr(bench.replication, "throughput", timed)
    limit = bench.replication.pipe_limit(_fake_clusters(), "t", 1_000, 100, workers=2)
    assert limit.records_per_s == 200_000  # the Java producers' best, not 1,000,000/s
    assert "produce 200,000/s [batch" in limit.name and "bound by the stages" in limit.name
