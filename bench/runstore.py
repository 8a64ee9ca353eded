"""Run-record benchmark: storing a failover plan of N groups x 50 partitions and reading it back.

Every failover step reads its run back from the state store (what a resumed run relies on), so
the run record's cost is paid once per step.  Per size, on a fresh SQLite store (the embedded
default) and, with ``DRKIT_BENCH_PG_URL``, on PostgreSQL:

* ``create``: the run with its plan (the per-group rows into their own table);
* ``get``: reading the run back, as every step does (without the per-group rows);
* ``planned``: the whole plan as a value, rows included (what the translation step reads);

anchored against ``json.dumps`` + ``json.loads`` of the same plan document in memory - the least
any store that keeps the document must do.  Then, on SQLite, what an operator waits for with
such a run in the store: ``drkit failover list``, ``failover show RUN`` and ``failover show RUN
-o json`` as commands, against ``drkit db current`` (a process that starts, loads the config and
opens the same store) as the anchor.  No Kafka cluster is involved.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import markdown_table
from drkit.failover.model import (
    GroupMove,
    PartitionMove,
    Plan,
    PlannedStep,
    Procedure,
    StepName,
)
from drkit.failover.runs import RunRepository
from drkit.store.db import StateStore


def make_plan(groups: int, partitions: int) -> Plan:
    moves = tuple(
        GroupMove(
            f"group-{g:05d}",
            "empty",
            False,
            tuple(
                PartitionMove("orders", p, "dc1.orders", p, 1000 + p, 990 + p, "exact", 3, 0)
                for p in range(partitions)
            ),
        )
        for g in range(groups)
    )
    steps = (PlannedStep(1, StepName.TRANSLATE_OFFSETS, None, None),)
    return Plan(Procedure.FAILOVER, "dc1", "dc2", "dc1->dc2", None, False, "checkpoints",
                steps, moves, (), (), (), "dc1", "dc2")  # fmt: skip


def _timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def measure(url: str, plan: Plan) -> dict[str, float]:
    store = StateStore(url)
    store.upgrade()
    runs = RunRepository(store)
    document = plan.to_json()
    out = {"anchor": _timed(lambda: json.loads(json.dumps(document)))}
    created: list[int] = []
    out["create"] = _timed(lambda: created.append(runs.create(plan, "bench", "bench").id))
    out["get"] = _timed(lambda: runs.get(created[0]))
    fresh = runs.get(created[0])
    assert fresh is not None
    out["planned"] = _timed(lambda: fresh.planned)
    assert len(fresh.planned.groups) == len(plan.groups)
    store.engine.dispose()
    return out


def _commands(plan: Plan, scratch: str, runs: int) -> dict[str, float]:
    """Median seconds of each command over ``runs`` on a store holding ``plan``'s run."""
    url = f"sqlite:///{scratch}/commands-{len(plan.groups)}.db"
    store = StateStore(url)
    store.upgrade()
    run = RunRepository(store).create(plan, "bench", "bench")
    store.engine.dispose()
    config = Path(scratch) / "commands.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n"
        f"state_store: {{url: '{url}'}}\n"
    )
    commands = {
        "anchor": ["db", "current"],
        "list": ["failover", "list"],
        "show": ["failover", "show", str(run.id)],
        "show -o json": ["failover", "show", str(run.id), "-o", "json"],
    }
    out: dict[str, float] = {}
    for name, args in commands.items():
        command = [sys.executable, "-m", "drkit", *args, "--config", str(config)]
        timed = []
        for _ in range(runs):
            started = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            timed.append(time.perf_counter() - started)
        out[name] = statistics.median(timed)
    return out


def main(groups: list[int], partitions: int = 50, runs: int = 3) -> str:
    stores: list[tuple[str, Callable[[], str]]] = []
    scratch = tempfile.mkdtemp(prefix="drkit-bench-runstore-")
    counter = iter(range(1_000_000))
    stores.append(("SQLite", lambda: f"sqlite:///{scratch}/runs-{next(counter)}.db"))
    pg = os.environ.get("DRKIT_BENCH_PG_URL")
    if pg:
        stores.append(("PostgreSQL", lambda: pg))
    rows = []
    for count in groups:
        plan = make_plan(count, partitions)
        for name, url in stores:
            samples = [measure(url(), plan) for _ in range(runs)]
            median = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
            anchor = median["anchor"]
            rows.append(
                [f"{count:,} x {partitions}", name]
                + [f"{median[k]:.3f} s ({median[k] / anchor:.2f}x)" for k in ("create", "get")]
                + [f"{median['planned']:.2f} s ({median['planned'] / anchor:.2f}x)"]
                + [f"{anchor:.2f} s"]
            )
            print(f"  {count} groups, {name}: {median}", flush=True)
    header = ["groups x partitions", "store", "create", "get (every step)", "planned", "anchor"]
    shown = []
    for count in groups:
        took = _commands(make_plan(count, partitions), scratch, runs)
        anchor = took["anchor"]
        shown.append(
            [f"{count:,} x {partitions}"]
            + [f"{took[k]:.2f} s ({took[k] / anchor:.2f}x)" for k in _COMMANDS_SHOWN]
            + [f"{anchor:.2f} s"]
        )
        print(f"  {count} groups, commands: {took}", flush=True)
    return (
        f"### Run record: a plan stored and read back (median of {runs})\n\n"
        + markdown_table(header, rows)
        + "\n\nanchor: json.dumps + json.loads of the same plan document in memory.\n\n"
        + f"### Commands on a store holding that run (SQLite, median of {runs})\n\n"
        + markdown_table(_COMMAND_HEADER, shown)
    )


_COMMANDS_SHOWN = ("list", "show", "show -o json")
_COMMAND_HEADER = [
    "groups x partitions",
    "failover list",
    "failover show RUN",
    "failover show RUN -o json",
    "anchor: drkit db current",
]
