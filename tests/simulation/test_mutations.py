"""The simulation finds what it is meant to find: each of issue 44's fixes reverted in the
smallest way (tests/simulation/mutations.py) is reported, on the seed a search found first, by
the invariant named for it - and the same seed holds with the fix in place.  A checker that
stopped looking, or a schedule that stopped reaching the window, fails here.

The seeds are the first failing ones of ``python -m tests.simulation --from 0 --count 600
--mutation NAME --first`` - with ``--topology three-dc`` for those only three clusters show
(``python -m bench simulation --mutations 600`` measures them again).
"""

from __future__ import annotations

import pytest

from tests.simulation.campaign import run_schedule
from tests.simulation.mutations import MUTATIONS, THREE_DC_MUTATIONS, mutated
from tests.simulation.world import THREE_DC, TWO_DC, Template

FOUND_BY = {
    "after-hooks-not-resumed": 32,
    "fence-the-planned-topics": 16,
    "lapsed-lease-floored": 101167,
    "no-answer-without-a-verified-run": 202,
    "no-replicator-fence": 965,
    "pending-fences-whatever-the-pointer": 91,
    "registry-modes-by-the-step": 23,
    "replicator-without-the-secret": 29,
    "rollback-leaves-target-open": 54,
}
# Two-cluster assumptions only the three-cluster world shows (``--topology three-dc``).
FOUND_IN_THREE_DC = {
    "guard-the-primarys-flows-only": 0,
}


def test_every_mutation_has_a_seed() -> None:
    assert sorted(FOUND_BY | FOUND_IN_THREE_DC) == sorted(MUTATIONS)
    assert sorted(FOUND_IN_THREE_DC) == sorted(THREE_DC_MUTATIONS)


@pytest.mark.parametrize(
    ("name", "topology"),
    [(name, TWO_DC.name) for name in sorted(FOUND_BY)]
    + [(name, THREE_DC.name) for name in sorted(FOUND_IN_THREE_DC)],
)
def test_a_reverted_fix_is_found_by_its_invariant(
    name: str, topology: str, template: Template
) -> None:
    seed = (FOUND_BY | FOUND_IN_THREE_DC)[name]
    with mutated(name) as mutation:
        broken = run_schedule(seed, template, topology=topology)
    assert not broken.ok, f"{name}: seed {seed} no longer finds finding {mutation.finding}"
    assert any(v.invariant == mutation.invariant for v in broken.violations), (
        f"{name}: expected '{mutation.invariant}', got {[str(v) for v in broken.violations]}"
    )
    fixed = run_schedule(seed, template, topology=topology)
    assert fixed.ok, [str(v) for v in fixed.violations] or fixed.error
