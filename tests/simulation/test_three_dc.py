"""The three-cluster world's own checks, shown to fail where they must (issue 48 item 1):
the protections' convergence at the end of a schedule, and the records a former primary
acknowledged below its fence point - with the known gap ``not-re-pointed`` exempted only
where no flow could have carried them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.simulation.campaign import Driver, Profile
from tests.simulation.invariants import Checker
from tests.simulation.scheduler import Sim
from tests.simulation.world import THREE_DC, SimWorld, Template


@pytest.fixture
def world(template: Template) -> Iterator[SimWorld]:
    sim = Sim(1)
    found = SimWorld(sim, template, topology=THREE_DC)
    yield found
    sim.finish()
    found.close()


def test_protections_converge_only_once_the_maintenance_ran(world: SimWorld) -> None:
    before = Checker(world)
    before.converged()  # nothing reconciled yet: every registry as it came, READWRITE
    assert {v.invariant for v in before.violations} == {"protections converge"}
    assert any("dc3's registry is READWRITE" in v.detail for v in before.violations)
    driver = Driver(world.sim, world, Checker(world), Profile())
    driver._spawn("setup", driver._setup_body)
    driver._drain_setup()  # the monitor's first pass, as every schedule starts
    driver.checker.converged()
    assert driver.checker.violations == []


def test_what_a_former_primary_acknowledged_is_on_the_next_primary(world: SimWorld) -> None:
    """dc2 acknowledged orders.n1[0] to 3 and failed back to dc1 (a planned move: its fence
    point).  A move onto dc1 (dc2 -> dc1 flows) must find it there; a move onto dc3 cannot -
    nothing re-points dc3 to dc2 - and says so as the known gap, not as a violation."""
    checker = Checker(world)
    checker.fence_points[("dc2", "orders.n1", 0)] = 3
    dc1 = world.clusters["dc1"]
    dc1.add_topic("dc2.orders.n1", 1)
    dc1.append("dc2.orders.n1", 0, 2)
    checker._carried_over(7, "dc3", "dc1")
    [short] = checker.violations
    assert short.invariant == "nothing acknowledged is lost"
    assert "dc2.orders.n1" in short.detail
    dc1.append("dc2.orders.n1", 0, 1)
    held = Checker(world, fence_points=dict(checker.fence_points))
    held._carried_over(7, "dc3", "dc1")
    assert held.violations == [] and held.known_gaps == 0
    held._carried_over(8, "dc1", "dc3")
    assert held.violations == [] and held.known_gaps == 1
    assert any("known gap not-re-pointed" in line for line in world.sim.trace)
