"""Inputs a new user tried that ended in a Python traceback: each is now one line naming the
cause, with an exit code of the table (issue: operator trust)."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from drkit.cli import cli
from drkit.errors import ConfigError
from drkit.listening import binding

CONFIG = """
clusters:
  dc1: {bootstrap_servers: "127.0.0.1:1"}
  dc2: {bootstrap_servers: "127.0.0.1:2"}
flows: [{source: dc1, target: dc2}]
"""


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def _drkit(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drkit", "--state-dir", str(state), *args],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_a_store_written_by_a_newer_drkit_is_named_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "drkit.yaml").write_text(CONFIG)
    runner = CliRunner()
    state = ["--state-dir", str(tmp_path)]
    assert runner.invoke(cli, [*state, "db", "upgrade"]).exit_code == 0
    with sqlite3.connect(tmp_path / "drkit.db") as db:
        db.execute("UPDATE alembic_version SET version_num = '0099'")
    plan = ["failover", "--from", "dc1", "--to", "dc2", "--plan"]
    for command in (["status", "--no-probe"], ["db", "upgrade"], ["pointer", "show"],
                    ["drill", "list"], plan):  # fmt: skip
        done = runner.invoke(cli, [*state, *command])
        assert done.exit_code == 2, (command, done.output)
        assert "at revision 0099, which this drkit" in done.output, (command, done.output)
        assert "a newer drkit wrote it" in done.output
        assert not isinstance(done.exception, Exception) or isinstance(
            done.exception, SystemExit
        ), done.exception
    current = runner.invoke(cli, [*state, "db", "current"])
    assert current.exit_code == 0 and "written by a newer drkit" in current.output
    with sqlite3.connect(tmp_path / "drkit.db") as db:  # nothing was changed
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [("0099",)]


def test_a_refused_listen_address_names_the_option_and_the_reason(taken_port: int) -> None:
    in_use = f"--listen: cannot listen on 127.0.0.1:{taken_port}: Address already in use"
    with (
        pytest.raises(ConfigError, match=in_use),
        binding("--listen", "127.0.0.1", taken_port),
        socket.socket() as again,
    ):
        again.bind(("127.0.0.1", taken_port))
    with (
        pytest.raises(ConfigError, match=r"host 'nohost\.invalid' does not resolve"),
        binding("--metrics-port", "nohost.invalid", 80),
    ):
        socket.getaddrinfo("nohost.invalid", 80)
    with (
        pytest.raises(ConfigError, match="ports are 0-65535"),
        binding("--listen", "127.0.0.1", 70000),
        socket.socket() as wide,
    ):
        wide.bind(("127.0.0.1", 70000))


PORT_USERS = [
    ["monitor", "--listen", "127.0.0.1:{port}"],
    ["replicate", "--metrics-port", "{port}"],
    ["replicate", "--metrics-port", "{port}", "--workers", "2"],
]


@pytest.mark.parametrize("command", PORT_USERS)
def test_monitor_and_replicate_on_a_port_in_use_exit_2_in_one_line(
    command: list[str], taken_port: int, tmp_path: Path
) -> None:
    (tmp_path / "drkit.yaml").write_text(CONFIG)
    args = [part.format(port=taken_port) for part in command]
    done = _drkit(tmp_path / "state", *args, "--config", str(tmp_path / "drkit.yaml"))
    assert done.returncode == 2, done.stdout + done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert f"cannot listen on 127.0.0.1:{taken_port}: Address already in use" in done.stderr


def test_drill_trend_into_a_missing_directory_is_refused_before_anything(tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, ["--state-dir", str(tmp_path), "drill", "trend", "--html",
                                    str(tmp_path / "no" / "such" / "trend.html")])  # fmt: skip
    assert done.exit_code == 2, done.output
    assert "--html: cannot write" in done.output, done.output
    assert f"{tmp_path / 'no' / 'such'} does not exist" in done.output, done.output


def test_readiness_with_both_clusters_down_measures_nothing_and_claims_nothing(
    tmp_path: Path,
) -> None:
    """It said "RPO 0 records, nothing lost", passed two checks on groups it never saw and
    exited 9 ("the records disprove it"); a refused --to stored a failed drill."""
    import json

    (tmp_path / "drkit.yaml").write_text(CONFIG)
    runner = CliRunner()
    state = ["--state-dir", str(tmp_path)]
    refused = runner.invoke(cli, [*state, "drill", "readiness", "--from", "dc1", "--to", "dc9"])
    assert refused.exit_code == 2 and "unknown cluster 'dc9'" in refused.output
    assert "no drills yet" in runner.invoke(cli, [*state, "drill", "list"]).output
    done = runner.invoke(cli, [*state, "drill", "readiness", "--from", "dc1", "--to", "dc2",
                               "-o", "json"])  # fmt: skip
    assert done.exit_code == 3, done.output  # not ready: a check found a problem
    report = json.loads(done.stdout)
    assert report["rpo_measured"] is False and report["verdict"] == "NotReady"
    assert not [c for c in report["checks"] if c["passed"]], report["checks"]
    text = runner.invoke(cli, [*state, "drill", "show"]).output
    assert "RPO: not measured" in text and "nothing lost" not in text, text


def test_under_json_output_an_error_is_a_document_on_stdout_too(tmp_path: Path) -> None:
    """A script reading ``-o json`` once got an empty stdout on any error."""
    import json

    (tmp_path / "drkit.yaml").write_text(CONFIG)
    runner = CliRunner()
    shown = runner.invoke(cli, ["--state-dir", str(tmp_path), "drill", "show", "99", "-o", "json"])
    assert shown.exit_code == 2
    document = json.loads(shown.stdout)
    assert document["schema"] == "drkit.error/v1" and document["ok"] is False
    assert document["exit_code"] == 2 and "no drill 99" in document["errors"][0]
    # A command that printed its own verdict document is not doubled by the error's.
    (tmp_path / "bad.yaml").write_text(CONFIG.replace("127.0.0.1:1", "no-port"))
    bad = runner.invoke(cli, ["config", "validate", str(tmp_path / "bad.yaml"), "--output=json"])
    assert bad.exit_code == 2
    assert json.loads(bad.stdout)["schema"] == "drkit.config.validate/v1"


def test_an_unknown_local_cluster_and_an_unusable_store_url_are_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both exited 1 ("the operation failed"); they are input drkit refuses: exit 2."""
    runner = CliRunner()
    for verb in ("kill", "logs", "stop"):
        done = runner.invoke(cli, ["--state-dir", str(tmp_path), "local", verb, "dc9"])
        assert done.exit_code == 2 and "no local cluster 'dc9'" in done.output, done.output
    (tmp_path / "drkit.yaml").write_text(CONFIG)
    monkeypatch.setenv("DRKIT_DB_URL", "nosuchdb://x/y")
    store = runner.invoke(cli, ["--state-dir", str(tmp_path), "pointer", "show"])
    assert store.exit_code == 2 and "cannot use state store" in store.output, store.output


def test_readiness_with_the_target_down_names_the_target_not_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """M3 (issue 45): with dc2 down and dc1 answering, readiness said "dc1 does not answer"."""
    import json

    import drkit.kafka
    from drkit.drills import readiness
    from tests.fake_kafka import FakeClusters

    fakes = FakeClusters("dc1", "dc2")
    fakes["dc2"].up = False
    monkeypatch.setattr(drkit.kafka, "KafkaAdmin", fakes.connect)  # the command's factory
    # The clusters are in memory: the first-answer check (raw sockets) is past, as it would
    # be for a target that answers it and then fails the plan's reads.
    monkeypatch.setattr(readiness, "_not_answering", lambda *_clusters: {})
    (tmp_path / "drkit.yaml").write_text(CONFIG)
    done = CliRunner().invoke(cli, ["--state-dir", str(tmp_path), "drill", "readiness",
                                    "--from", "dc1", "--to", "dc2", "-o", "json"])  # fmt: skip
    assert done.exit_code == 3, done.output
    report = json.loads(done.stdout)
    assert "dc1 does not answer" not in done.stdout, report
    details = {c["name"]: c["detail"] for c in report["checks"]}
    for name in ("topic_parity", "checkpoints", "link_health", "shadow_translation"):
        assert "dc2 does not answer" in details[name], details
    assert "dc2 does not answer" in report["notes"][0], report["notes"]


def _no_brokers(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """LocalKafka.up recording what it was asked to start (nothing is started)."""
    from drkit.local import LocalKafka

    started: list[list[str]] = []

    def up(_self: object, names: list[str], *_args: object, **_kwargs: object) -> list[object]:
        started.append(list(names))
        raise AssertionError(f"brokers started: {names}")

    monkeypatch.setattr(LocalKafka, "up", up)
    return started


def test_local_up_refuses_a_config_path_it_cannot_write_before_starting_brokers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45, M10: `local up` started the brokers, then failed writing its config and left
    them running. Where the config cannot be written is found first: exit 2, nothing started."""
    started = _no_brokers(monkeypatch)
    state = tmp_path / "state"
    (state / "drkit.yaml").mkdir(parents=True)  # the config path is a directory
    done = CliRunner().invoke(cli, ["--state-dir", str(state), "local", "up"])
    assert done.exit_code == 2, done.output
    assert f"{state / 'drkit.yaml'}: " in done.output and "Traceback" not in done.output
    assert started == []
    blocked = tmp_path / "file"
    blocked.write_text("")  # the state directory would be under a file
    done = CliRunner().invoke(cli, ["--state-dir", str(blocked / "state"), "local", "up"])
    assert done.exit_code == 2, done.output
    assert f"cannot be created: {blocked} is not a directory" in done.output
    assert started == []


def test_demo_refuses_a_scenario_naming_no_local_cluster_before_touching_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45, M10: `demo --scenario` naming a cluster that is not there started clusters and
    rewrote the local config before refusing; now it refuses first (exit 2), touching nothing."""
    started = _no_brokers(monkeypatch)
    shipped = Path(__file__).parents[2] / "runbooks" / "drills" / "planned-switchover.yaml"
    scenario = tmp_path / "dc9.yaml"
    scenario.write_text(shipped.read_text().replace("source: dc1", "source: dc9"))
    state = tmp_path / "state"
    state.mkdir()
    config = state / "drkit.yaml"
    config.write_text(CONFIG)
    done = CliRunner().invoke(
        cli, ["--state-dir", str(state), "demo", "--scenario", str(scenario), "--skip-verify"]
    )
    assert done.exit_code == 2, done.output
    assert "dc9" in done.output and "nothing was done" in done.output, done.output
    assert started == [] and config.read_text() == CONFIG
