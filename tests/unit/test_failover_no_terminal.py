"""A move without --yes and without a terminal to confirm on is refused before its plan is
computed and printed (trial 5, k12: 4-7 s of planning, the whole plan, then "--yes: not a
terminal"); --plan still plans and prints."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from drkit.cli import cli
from drkit.errors import ConfigError, Problem

CONFIG = (
    "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
    "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
    "flows: [{source: dc1, target: dc2}, {source: dc2, target: dc1}]\n"
)


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "drkit.yaml"
    path.write_text(CONFIG + f"state_store: {{url: 'sqlite:///{tmp_path / 'drkit.db'}'}}\n")

    def planning(*_args: object) -> None:  # the engine: opened to plan
        raise ConfigError([Problem("engine", "reached the planning")])

    monkeypatch.setattr("drkit.cli.failover_cmd._engine", planning)
    # The clusters are addresses nothing listens on: a planned move's first check of both
    # (tests/unit/test_not_kafka.py) would end it before the planning this test looks for.
    monkeypatch.setattr("drkit.cli.failover_cmd._require_both_answering", lambda *_args: None)
    return path


@pytest.mark.parametrize(
    "move",
    [
        ["failover", "--from", "dc1", "--to", "dc2"],
        ["switchover", "--from", "dc1", "--to", "dc2"],
        ["cutover", "--from", "dc1", "--to", "dc2"],
        ["failback", "--from", "dc2", "--to", "dc1"],
    ],
)
def test_without_yes_and_a_terminal_a_move_is_refused_before_it_plans(
    config: Path, move: list[str]
) -> None:
    refused = CliRunner().invoke(cli, [*move, "--config", str(config)])  # stdin: not a terminal
    assert refused.exit_code == 2, refused.output
    assert "--yes: not a terminal" in refused.output and "--plan" in refused.output
    assert "reached the planning" not in refused.output
    for enough in (["--plan"], ["--yes"]):
        planned = CliRunner().invoke(cli, [*move, *enough, "--config", str(config)])
        assert "reached the planning" in planned.output, (enough, planned.output)
