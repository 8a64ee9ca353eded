"""``drkit failover --from X`` without ``--to`` promotes the best standby of X and says why
(issue 48 item 1): the health the monitors' quorum stored, the RPO of each standby's plan."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner

from drkit.cli import cli
from drkit.cli.failover_cmd import _plan_document, best_standby
from drkit.config.loader import load_config_text
from drkit.errors import UnreachableClusterError
from drkit.failover.engine import Engine
from drkit.failover.model import Finding, Plan, Procedure, Severity
from drkit.failover.render import plan_text
from drkit.failover.run_result import RunOptions
from drkit.lag import PartitionRpo
from drkit.store import StateStore
from drkit.store.models import ObserverState

CONFIG = """
clusters:
  dc1: {bootstrap_servers: "127.0.0.1:1"}
  dc2: {bootstrap_servers: "127.0.0.1:2"}
  dc3: {bootstrap_servers: "127.0.0.1:3"}
  dc4: {bootstrap_servers: "127.0.0.1:4"}
flows:
  - {source: dc1, target: dc2}
  - {source: dc1, target: dc3}
  - {source: dc2, target: dc4}
health: {observer_quorum: 1}
"""


class PlanningEngine:
    """The engine's config, store and plan, with given figures per target."""

    def __init__(self, store: StateStore, figures: dict[str, Any]) -> None:
        self.config = load_config_text(CONFIG, env={})
        self.store = store
        self.figures = figures

    def plan(self, procedure: Procedure, source: str, target: str, _options: Any) -> Any:
        figure = self.figures[target]
        if isinstance(figure, Exception):
            raise figure
        records, seconds, blocker = figure
        row = PartitionRpo("orders", 0, None, None, records, None, seconds)
        blockers = (Finding(Severity.BLOCKER, "x", blocker),) if blocker else ()
        return Plan(
            procedure, source, target, f"{source}->{target}", None, False, "checkpoints", (), (),
            (), (row,), blockers, None, target,
        )  # fmt: skip


def _store(tmp_path: Path, states: dict[str, str]) -> StateStore:
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    now = datetime.now(UTC)
    with store.session() as session:
        for cluster, state in states.items():
            session.add(ObserverState(observer="east", cluster=cluster, state=state, since=now,
                                      updated_at=now))  # fmt: skip
        session.commit()
    return store


def _choose(tmp_path: Path, states: dict[str, str], figures: dict[str, Any]) -> Any:
    engine = PlanningEngine(_store(tmp_path, states), figures)
    return best_standby(cast(Engine, engine), "dc1", RunOptions())


def test_the_smaller_rpo_is_chosen_and_the_plan_names_the_other_with_its_figures(
    tmp_path: Path,
) -> None:
    states = {"dc1": "UNAVAILABLE", "dc2": "HEALTHY", "dc3": "HEALTHY"}
    plans, choice = _choose(tmp_path, states, {"dc2": (250, 40.0, ""), "dc3": (3, 1.5, "")})
    assert choice.chosen.target == "dc3"
    assert set(plans) == {"dc2", "dc3"}  # only the flows out of dc1, never dc2->dc4
    text = plan_text(plans["dc3"], choice)
    assert "standby dc3 chosen" in text
    assert "dc2: lost" in text and "250 records" in text and "HEALTHY" in text
    document = _plan_document(plans["dc3"], choice)
    standby = document["standby_choice"]
    assert standby["chosen"] == "dc3"
    [dc2] = [c for c in standby["candidates"] if c["cluster"] == "dc2"]
    assert (dc2["outcome"], dc2["rpo_records"], dc2["rpo_s"], dc2["healthy"]) == (
        "lost", 250, pytest.approx(40.0, abs=1.0), True,
    )  # fmt: skip


def test_a_standby_the_monitors_see_down_or_never_saw_is_excluded(tmp_path: Path) -> None:
    """dc2 has the smaller RPO but the quorum sees it UNAVAILABLE; with no observer state at
    all for it, it is UNKNOWN - excluded too, with why."""
    figures = {"dc2": (0, 0.5, ""), "dc3": (90, 12.0, "")}
    _plans, choice = _choose(tmp_path, {"dc2": "UNAVAILABLE", "dc3": "HEALTHY"}, figures)
    assert choice.chosen.target == "dc3"
    assert "UNAVAILABLE" in choice.verdict_of("dc2").why
    _plans, unseen = _choose(tmp_path / "b", {"dc3": "HEALTHY"}, figures)
    assert unseen.chosen.target == "dc3"
    assert "no monitor has reported it" in unseen.verdict_of("dc2").why


def test_a_standby_that_cannot_be_planned_or_is_blocked_is_excluded(tmp_path: Path) -> None:
    states = {"dc2": "HEALTHY", "dc3": "HEALTHY"}
    figures = {"dc2": UnreachableClusterError("dc2", "127.0.0.1:2"), "dc3": (5, 2.0, "")}
    _plans, choice = _choose(tmp_path, states, figures)
    assert choice.chosen.target == "dc3"
    assert (
        "its plan failed: cluster 'dc2' at 127.0.0.1:2 is unreachable"
        in choice.verdict_of("dc2").why
    )
    blocked = {"dc2": (0, 0.1, "an unfinished run"), "dc3": (0, 0.1, "an unfinished run")}
    _plans, none = _choose(tmp_path / "b", states, blocked)
    assert none.chosen is None
    assert "an unfinished run" in none.why_none()


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("dc9", "--from: unknown cluster 'dc9'"),
        ("dc3", "--from: no flow replicates dc3: no standby to promote"),
    ],
)
def test_a_source_without_standbys_is_named_before_anything(
    tmp_path: Path, source: str, says: str
) -> None:
    config = tmp_path / "drkit.yaml"
    config.write_text(CONFIG + f"state_store: {{url: 'sqlite:///{tmp_path / 'drkit.db'}'}}\n")
    result = CliRunner().invoke(
        cli, ["--state-dir", str(tmp_path), "failover", "--from", source, "--plan",
              "--config", str(config)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert says in result.output


def test_without_from_the_failover_says_what_it_needs(tmp_path: Path) -> None:
    config = tmp_path / "drkit.yaml"
    config.write_text(CONFIG)
    result = CliRunner().invoke(
        cli, ["--state-dir", str(tmp_path), "failover", "--to", "dc2", "--plan",
              "--config", str(config)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--from: required" in result.output
