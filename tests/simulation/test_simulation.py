"""The control plane under seeded schedules of kills, freezes, races and faults: every
invariant (tests/simulation/invariants.py) after every event.

CI runs the regression seeds, then at least ``DRKIT_SIM_SCHEDULES`` (2,000) schedules in
``SHARDS`` shards, each going on until its share of ``DRKIT_SIM_BUDGET_S`` (300 s of two
cores: 600 process-seconds) is spent.  Seeds start at ``DRKIT_SIM_SEED_BASE``
(0: the same schedules every run; set another base to explore new ones - ``python -m bench
simulation`` runs long campaigns).  A failing seed prints its one-line replay.

The three-cluster world (dc1 -> dc2 and dc1 -> dc3, ``--topology three-dc``) runs
``DRKIT_SIM_THREE_DC_SCHEDULES`` (100) schedules of its own from the same base, every invariant
after every event as in the default world.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.simulation.campaign import Outcome, run_schedule
from tests.simulation.world import THREE_DC, TWO_DC, Template

SHARDS = 4
SCHEDULES = int(os.environ.get("DRKIT_SIM_SCHEDULES", "2000"))
BUDGET_S = float(os.environ.get("DRKIT_SIM_BUDGET_S", "300"))
SEED_BASE = int(os.environ.get("DRKIT_SIM_SEED_BASE", "0"))
# The budget is DRKIT_SIM_BUDGET_S of this machine kind's two cores: BUDGET_S * WORKERS
# process-seconds shared by the shards, however many processes run them (scripts/test runs
# them in one, at the lowest priority beside the integration tests).
WORKERS = 2
REGRESSIONS = Path(__file__).with_name("regressions.txt")
THREE_DC_SCHEDULES = int(os.environ.get("DRKIT_SIM_THREE_DC_SCHEDULES", "100"))


def regression_seeds() -> list[tuple[int, str]]:
    """Seeds that once failed (``seed [topology]  # what it found``; two-dc unless named),
    kept as regression cases."""
    seeds = []
    for line in REGRESSIONS.read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            seeds.append((int(words[0]), words[1] if len(words) > 1 else TWO_DC.name))
    return seeds


def _report(outcome: Outcome) -> str:
    lines = [f"seed {outcome.seed}: {outcome.error or ''}"]
    lines += [f"  {violation}" for violation in outcome.violations]
    lines += ["  last events:", *(f"    {event}" for event in outcome.trace[-25:])]
    lines.append(f"  replay: {outcome.replay()}")
    return "\n".join(lines)


def test_the_regression_seeds_hold(template: Template) -> None:
    for seed, topology in regression_seeds():
        outcome = run_schedule(seed, template, topology=topology)
        assert outcome.ok, _report(outcome)


@pytest.mark.timeout(0)  # its own budget: a count and a time, whichever ends later
@pytest.mark.parametrize("shard", range(SHARDS))
def test_seeded_schedules_hold_every_invariant(shard: int, template: Template) -> None:
    wanted = -(-SCHEDULES // SHARDS)
    budget_s = BUDGET_S * WORKERS / SHARDS
    started = time.monotonic()
    done = runs = events = 0
    seed = SEED_BASE + shard
    while done < wanted or time.monotonic() - started < budget_s:
        outcome = run_schedule(seed, template)
        assert outcome.ok, _report(outcome)
        done, runs, events = done + 1, runs + outcome.runs, events + outcome.events
        seed += SHARDS
    elapsed = time.monotonic() - started
    print(
        f"simulation shard {shard}: {done} schedules, 0 violations, {runs} runs, "
        f"{events} events in {elapsed:.0f}s (seeds {SEED_BASE + shard}..{seed - SHARDS} "
        f"step {SHARDS})"
    )


def test_three_cluster_schedules_hold_every_invariant(template: Template) -> None:
    """dc1 -> dc2 and dc1 -> dc3: moves between dc1 and either standby, the other standby
    protected throughout (issue 48 item 1)."""
    started = time.monotonic()
    runs = events = 0
    seeds = range(SEED_BASE, SEED_BASE + THREE_DC_SCHEDULES)
    for seed in seeds:
        outcome = run_schedule(seed, template, topology=THREE_DC.name)
        assert outcome.ok, _report(outcome)
        runs, events = runs + outcome.runs, events + outcome.events
    print(
        f"three-dc: {len(seeds)} schedules, 0 violations, {runs} runs, {events} events in "
        f"{time.monotonic() - started:.0f}s (seeds {seeds.start}..{seeds.stop - 1})"
    )
