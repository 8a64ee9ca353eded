"""Drill scenarios: every shipped one loads; bad ones are refused naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from drkit.drills.scenario import FaultKind, load_scenario, shipped
from drkit.errors import ConfigError
from drkit.failover.model import Procedure

EXPECTED = {
    "planned-switchover",
    "migration-cutover",
    "unplanned-loss-of-dc1",
    "network-cut-dc1",
    "consumers-lagging",
    "engine-killed-mid-failover",
    "automatic-failover",
    "failback-divergent-tail",
    "three-dc-loss-of-dc1",
}


def test_every_scenario_the_issue_names_is_shipped_and_loads() -> None:
    loaded = {p.stem: load_scenario(str(p)) for p in shipped()}
    assert set(loaded) == EXPECTED
    assert all(s.name == name for name, s in loaded.items())
    assert loaded["network-cut-dc1"].fault.kind is FaultKind.NETWORK_CUT
    assert loaded["migration-cutover"].move.procedure is Procedure.CUTOVER
    assert loaded["failback-divergent-tail"].move.failback
    # The README's main job needs offsets that differ between clusters.
    assert any(t.transactional and t.abort_every for t in
               loaded["unplanned-loss-of-dc1"].workload.topics)  # fmt: skip


def test_a_shipped_scenario_is_found_by_name() -> None:
    assert load_scenario("planned-switchover").move.procedure is Procedure.SWITCHOVER


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return str(path)


BASE = """
name: x
title: X
workload:
  topics: [{name: orders}]
  groups: [{name: g, topic: %s}]
fault: {kind: %s}
move: {procedure: %s}
policy: {rto_s: 10}
"""


@pytest.mark.parametrize(
    ("topic", "fault", "procedure", "message"),
    [
        ("orders", "kill_brokers", "switchover", "fault.kind must be none"),
        ("orders", "none", "failover", "needs a fault"),
        ("payments", "kill_brokers", "failover", "not a workload topic"),
        ("orders", "meteor", "failover", "fault.kind"),
        ("orders", "kill_brokers", "failback", "failback: true"),
    ],
)
def test_a_bad_scenario_is_refused_naming_the_cause(
    tmp_path: Path, topic: str, fault: str, procedure: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_scenario(_write(tmp_path, BASE % (topic, fault, procedure)))


def test_an_unknown_step_to_kill_the_engine_after_is_named(tmp_path: Path) -> None:
    text = (BASE % ("orders", "kill_brokers", "failover")).replace(
        "move: {procedure: failover}", "move: {procedure: failover, engine_killed_after: nap}"
    )
    with pytest.raises(ConfigError, match=r"move\.engine_killed_after"):
        load_scenario(_write(tmp_path, text))


def test_an_unknown_scenario_name_lists_the_shipped_ones() -> None:
    with pytest.raises(ConfigError, match="planned-switchover"):
        load_scenario("no-such-drill")
