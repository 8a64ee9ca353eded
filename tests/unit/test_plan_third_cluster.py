"""With three clusters a plan's source need not be the active one: the pointer may be on a
third cluster (dc3) while an operator - or an engine that decided before another run moved the
pointer there - plans dc1 -> dc2.  Such a move would open dc2 beside dc3, the primary, and
carry none of dc3's writes: the plan blocks it, whatever the procedure (found by the
three-cluster simulation, seed 35: ``python -m tests.simulation --seed 35 --topology
three-dc``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from drkit.failover.model import Procedure, Severity
from tests.unit.test_failover_plan import _codes, _snapshot


@pytest.mark.parametrize("procedure", [Procedure.SWITCHOVER, Procedure.CUTOVER, Procedure.FAILOVER])
def test_a_move_from_a_cluster_that_is_not_the_active_one_is_blocked(
    procedure: Procedure,
) -> None:
    elsewhere = _snapshot(procedure, source_reachable=True, pointer="dc3")
    assert _codes(elsewhere)["pointer_elsewhere"] is Severity.BLOCKER
    for pointer in (None, "dc1"):  # unset: the first flow's source is the active one
        assert "pointer_elsewhere" not in _codes(replace(elsewhere, pointer=pointer))
