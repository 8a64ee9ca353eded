"""Run-record benchmark: storing a failover plan of N groups x 50 partitions and reading it back.

Every failover step reads its run back from the state store (what a resumed run relies on), so
the run record's cost is paid once per step.  Per size, on a fresh SQLite store (the embedded
default) and, with ``DRKIT_BENCH_PG_URL``, on PostgreSQL:

* ``create``: the run with its plan (the per-group rows into their own table);
* ``get``: reading the run back, as every step does (without the per-group rows);
* ``planned``: the whole plan as a value, rows included (what the translation step reads);

anchored against ``json.dumps`` + ``json.loads`` of the same plan document in memory - the least
any store that keeps the document must do.  No Kafka cluster is involved.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable

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
    return (
        f"### Run record: a plan stored and read back (median of {runs})\n\n"
        + markdown_table(header, rows)
        + "\n\nanchor: json.dumps + json.loads of the same plan document in memory."
    )
