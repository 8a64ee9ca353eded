"""CLI surface: help for every command, clean one-line errors, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from sqlalchemy import select

from drkit.cli import cli
from drkit.local.tls import LocalSecrets
from drkit.store.db import StateStore
from drkit.store.models import Verification


def all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    context = click.Context(group)
    # list_commands/get_command: the root group loads its commands lazily (group.commands is
    # empty there).
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None, name
        path = (*prefix, name)
        found.append(path)
        if isinstance(command, click.Group):
            found.extend(all_commands(command, path))
    return found


@pytest.mark.parametrize("path", all_commands(cli), ids=" ".join)
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    command: click.Command | None = cli
    for part in path:
        assert isinstance(command, click.Group)
        command = command.get_command(click.Context(command), part)
    assert command is not None
    assert command.help, f"{' '.join(path)} has no help text"
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden and param.name != "help":
            assert param.help, f"{' '.join(path)} {param.opts} has no help text"


def test_validate_reports_each_problem_on_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "clusters:\n  dc1: {bootstrap_servers: 'x'}\nflows:\n  - {source: dc1, target: nowhere}\n"
    )
    result = CliRunner().invoke(cli, ["config", "validate", str(bad)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 2
    assert any("clusters.dc1.bootstrap_servers" in line for line in lines)
    assert any("flows[0].target: unknown cluster 'nowhere'" in line for line in lines)
    assert "Traceback" not in result.output


def test_validate_good_file_exits_zero(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The example config validates where the CA file it names exists; where it does not, the
    file is named (the clients would refuse to start without it)."""
    for name in ("DRKIT_DC1_PASSWORD", "DRKIT_DC2_PASSWORD", "DRKIT_DB_PASSWORD"):
        monkeypatch.setenv(name, "secret")
    example = Path(__file__).resolve().parents[2] / "config" / "drkit.example.yaml"
    ca = "/etc/drkit/tls/ca.pem"
    if not Path(ca).exists():
        missing = CliRunner().invoke(cli, ["config", "validate", str(example)])
        assert missing.exit_code == 2, missing.output
        assert f"clusters.dc1.security.ssl_ca_location: {ca} does not exist" in missing.output
    secrets = LocalSecrets(tmp_path)  # a real CA: librdkafka reads it when it builds a client
    secrets.ensure()
    here = tmp_path / "drkit.yaml"
    here.write_text(example.read_text().replace(ca, str(secrets.ca)))
    result = CliRunner().invoke(cli, ["config", "validate", str(here)])
    assert result.exit_code == 0, result.output


def test_unreachable_cluster_is_one_line_and_non_zero(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("clusters:\n  far: {bootstrap_servers: '127.0.0.1:1'}\n"
                      "  away: {bootstrap_servers: '127.0.0.1:2'}\n")  # fmt: skip
    result = CliRunner().invoke(cli, ["clusters", "check", "--config", str(config)])
    assert result.exit_code == 3  # a cluster down: "a check found a problem", as everywhere
    assert "cluster 'far' at 127.0.0.1:1 is unreachable" in result.output
    assert "cluster 'away' at 127.0.0.1:2 is unreachable" in result.output
    # Known from the refused TCP connection, not after the Kafka client's timeout per cluster.
    assert "127.0.0.1:1: Connection refused" in result.output
    assert "Traceback" not in result.output


def test_no_config_anywhere_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DRKIT_CONFIG", raising=False)
    result = CliRunner().invoke(cli, ["--state-dir", str(tmp_path), "config", "show"])
    assert result.exit_code == 2
    assert "drkit local up" in result.output


def test_db_upgrade_and_current_on_default_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DRKIT_CONFIG", raising=False)
    monkeypatch.delenv("DRKIT_DB_URL", raising=False)
    runner = CliRunner()
    before = runner.invoke(cli, ["--state-dir", str(tmp_path), "db", "current"])
    assert "revision none" in before.output
    upgraded = runner.invoke(cli, ["--state-dir", str(tmp_path), "db", "upgrade"])
    assert upgraded.exit_code == 0, upgraded.output
    after = runner.invoke(cli, ["--state-dir", str(tmp_path), "db", "current"])
    assert "up to date" in after.output
    assert (tmp_path / "drkit.db").exists()


# v2 writes when it checked as ISO-8601 UTC; a v1 summary (an older job's) as epoch seconds.
@pytest.mark.parametrize(
    ("schema", "checked_at"),
    [("drkit.verify/v2", "2023-11-14T22:13:20.000Z"), ("drkit.verify/v1", 1_700_000_000.0)],
)
def test_verify_import_summary_records_a_spark_submit_run_and_rejects_other_files(
    tmp_path: Path, schema: str, checked_at: str | float
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
        "flows: [{source: dc1, target: dc2}]\n"
        f"state_store: {{url: 'sqlite:///{tmp_path / 'drkit.db'}'}}\n"
    )
    totals = dict.fromkeys(
        ("records", "replicated_once", "duplicated_records", "missing", "skipped_by_groups"), 0
    ) | {"records": 10, "replicated_once": 9, "missing": 1}
    summary: dict[str, object] = {
        "schema": schema, "flow": "dc1->dc2", "checked_at": checked_at,
        "elapsed_s": 3.5, "ok": False, "totals": totals, "partitions": [], "groups": [],
        "missing_ranges": [], "notes": [], "output": "hdfs:///drkit/run-1",
    }  # fmt: skip
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    runner = CliRunner()
    base = ["--state-dir", str(tmp_path), "verify", "--config", str(config), "--flow", "dc1->dc2"]

    imported = runner.invoke(cli, [*base, "--import-summary", str(path), "--output", "json"])
    assert imported.exit_code == 9, imported.output  # it reports a missing record
    assert json.loads(imported.output)["totals"]["missing"] == 1
    with StateStore(f"sqlite:///{tmp_path / 'drkit.db'}").session() as session:
        (row,) = session.scalars(select(Verification)).all()
    assert (row.flow, row.ok, row.missing, row.output_dir) == (
        "dc1->dc2", False, 1, "hdfs:///drkit/run-1"
    )  # fmt: skip
    assert row.started_at.replace(tzinfo=UTC).timestamp() == 1_700_000_000.0

    path.write_text(json.dumps(summary | {"flow": "dc2->dc1"}))
    wrong = runner.invoke(cli, [*base, "--import-summary", str(path)])
    assert wrong.exit_code != 0 and "Traceback" not in wrong.output
    assert "--import-summary" in wrong.output and "'dc2->dc1'" in wrong.output


@pytest.mark.parametrize("master", ["bogus://nowhere", "local[two]", "mesos://m:5050"])
def test_verify_rejects_a_bad_spark_master_before_touching_anything(
    tmp_path: Path, master: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n"
    )
    result = CliRunner().invoke(
        cli, ["verify", "--config", str(config), "--flow", "dc1->dc2", "--spark-master", master]
    )
    assert result.exit_code == 2, result.output
    assert f"--spark-master: {master!r} is not a Spark master URL" in result.output
    assert "Traceback" not in result.output


def test_verify_names_an_unreachable_spark_master_at_once_before_touching_anything(
    tmp_path: Path,
) -> None:
    """Issue 45: `--spark-master spark://127.0.0.1:1` hung ~80 s (Spark's own give-up). A
    spark:// master that takes no TCP connection is named in seconds, exit 3 (a cluster down),
    before the store or Kafka are touched."""

    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n"
    )
    result = CliRunner().invoke(
        cli, ["--state-dir", str(tmp_path / "s"), "verify", "--config", str(config), "--flow",
              "dc1->dc2", "--spark-master", "spark://127.0.0.1:1"],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    # The refused TCP connection's words: Spark itself (~80 s to give up) never ran, nor the
    # store or Kafka (issue 51: the cause, not a clock).
    assert "Spark master spark://127.0.0.1:1 is unreachable (127.0.0.1:1: " in result.output
    assert "Traceback" not in result.output and "dc1" not in result.output
    assert not (tmp_path / "s" / "drkit.db").exists()  # refused before the store was opened


def test_verify_refuses_to_write_a_spec_and_import_a_summary_at_once(tmp_path: Path) -> None:
    """M6 (issue 45): --write-spec won and --import-summary was silently ignored - the two ends
    of one spark-submit round trip, never one command."""
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n"
    )
    summary = tmp_path / "summary.json"
    summary.write_text("{}")
    spec = tmp_path / "spec.json"
    result = CliRunner().invoke(cli, ["--state-dir", str(tmp_path), "verify", "--config",
                                      str(config), "--flow", "dc1->dc2", "--import-summary",
                                      str(summary), "--write-spec", str(spec)])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--write-spec/--import-summary" in result.output and "choose one" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert not spec.exists() and not (tmp_path / "drkit.db").exists()


BAD_CONFIG = "clusters:\n  dc1: {bootstrap_servers: 'no-port'}\n"


@pytest.mark.parametrize("where", ["env", "cwd", "state-dir"])
def test_an_invalid_implicit_config_is_an_error_never_a_fallback_to_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    state.mkdir()
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("DRKIT_CONFIG", raising=False)
    monkeypatch.delenv("DRKIT_DB_URL", raising=False)
    found = {
        "env": tmp_path / "mine.yaml",
        "cwd": work / "drkit.yaml",
        "state-dir": state / "drkit.yaml",
    }
    found[where].write_text(BAD_CONFIG)
    if where == "env":
        monkeypatch.setenv("DRKIT_CONFIG", str(found[where]))
    result = CliRunner().invoke(cli, ["--state-dir", str(state), "db", "current"])
    assert result.exit_code == 2, result.output
    assert "clusters.dc1.bootstrap_servers" in result.output
    assert not (state / "drkit.db").exists()  # the default SQLite store was not used


def test_config_show_masks_secret_looking_client_overrides(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1:\n    bootstrap_servers: '127.0.0.1:1'\n"
        "    allow_insecure_overrides: true\n    client_overrides:\n"
        "      sasl.oauthbearer.client.secret: value-one\n      ssl.key.password: value-two\n"
        "      sasl.oauthbearer.token.endpoint.url: value-three\n      linger.ms: 5\n"
    )
    result = CliRunner().invoke(cli, ["config", "show", "--config", str(config), "-o", "json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)["config"]["clusters"]["dc1"]["client_overrides"]
    assert "value-" not in result.output
    assert shown["linger.ms"] == 5
    assert len({v for k, v in shown.items() if k != "linger.ms"}) == 1  # one mask for all


def test_config_show_masks_webhook_urls_even_resolved_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Webhook URLs carry the receiver's token (Slack, PagerDuty): on main `config show`
    printed them in clear, the one resolved from ${HOOK_TOKEN} included."""
    monkeypatch.setenv("HOOK_TOKEN", "hook-token-7f3a")
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1:\n    bootstrap_servers: '127.0.0.1:1'\n"
        "notifications:\n  webhooks:\n"
        "    - url: 'https://hooks.example.com/services/${HOOK_TOKEN}'\n"
        "    - url: 'https://alerts.example.com/plain-token-91c2'\n"
    )
    result = CliRunner().invoke(cli, ["config", "show", "--config", str(config), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert "hook-token-7f3a" not in result.output and "plain-token-91c2" not in result.output
    text = CliRunner().invoke(cli, ["config", "show", "--config", str(config)])
    assert text.exit_code == 0 and "hook-token-7f3a" not in text.output, text.output
    assert "plain-token-91c2" not in text.output and "url: '**********'" in text.output
    hooks = json.loads(result.stdout)["config"]["notifications"]["webhooks"]
    assert [hook["url"] for hook in hooks] == ["**********", "**********"]


def test_a_webhook_url_that_is_not_http_is_refused_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1:\n    bootstrap_servers: '127.0.0.1:1'\n"
        "notifications:\n  webhooks:\n    - url: 'ftp://example.com/secret-path'\n"
    )
    result = CliRunner().invoke(cli, ["config", "show", "--config", str(config)])
    assert result.exit_code == 2
    assert "notifications.webhooks[0].url: must be an http:// or https:// URL" in result.output
    assert "secret-path" not in result.output


def _monitor(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # A subprocess with a deadline: a monitor that accepted the argument would run forever.
    return subprocess.run(
        [sys.executable, "-m", "drkit", "monitor", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "DRKIT_STATE_DIR": str(config.parent)},
    )


@pytest.mark.parametrize("interval", ["0", "-1", "nan", "inf", "1e9"])
def test_monitor_rejects_a_senseless_interval(tmp_path: Path, interval: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n")
    done = _monitor(config, f"--interval={interval}", "--listen", "127.0.0.1:0")
    assert done.returncode == 2, done.stderr
    assert "--interval" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "drkit.db").exists()


def test_monitor_interval_must_stay_above_the_probe_timeout(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\nhealth: {probe_timeout_s: 4}\n"
    )
    done = _monitor(config, "--interval", "2", "--listen", "127.0.0.1:0")
    assert done.returncode == 2, done.stderr
    assert "--interval" in done.stderr and "probe_timeout_s" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_lazy_command_map_names_every_command_of_every_module() -> None:
    """drkit loads a command's module only when it runs; the map must match the modules."""
    import importlib
    import pkgutil

    import drkit.cli
    from drkit.cli import _COMMANDS

    defined: dict[str, str] = {}
    for info in pkgutil.iter_modules(drkit.cli.__path__):
        if info.name.endswith("_cmd"):
            module = importlib.import_module(f"drkit.cli.{info.name}")
            defined.update({str(c.name): info.name for c in module.COMMANDS})
    assert defined == _COMMANDS


def _store_with_a_failed_run(tmp_path: Path) -> tuple[Path, int]:
    """A config with its own SQLite store holding one FAILED failover run (no broker needed)."""
    from drkit.store import StateStore
    from tests.unit.test_operator_trust import failed_run

    db = tmp_path / "drkit.db"
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n"
        f"state_store: {{url: 'sqlite:///{db}'}}\n"
    )
    run_id = failed_run(tmp_path)  # in tmp_path / "drkit.db"
    store = StateStore(f"sqlite:///{db}")
    from drkit.failover.pointer import PointerRepository

    PointerRepository(store).move("dc2", None)  # the world moved on since it was planned
    store.engine.dispose()
    return config, run_id


def test_resume_of_a_run_whose_world_moved_on_abandons_it_and_changes_nothing(
    tmp_path: Path,
) -> None:
    config, run_id = _store_with_a_failed_run(tmp_path)
    state = ["--state-dir", str(tmp_path / "state")]
    result = CliRunner().invoke(cli, [*state, "failover", "--resume", str(run_id), "--yes",
                                      "--config", str(config)])  # fmt: skip
    assert result.exit_code == 8, result.output
    assert "abandoned" in result.output and "active cluster was dc1" in result.output
    assert "Traceback" not in result.output
    again = CliRunner().invoke(cli, [*state, "failover", "--resume", str(run_id), "--yes",
                                     "--config", str(config)])  # fmt: skip
    assert again.exit_code == 2 and "has ended" in again.output


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (["--from", "dc2", "--to", "dc1"], "--from dc2 --to dc1"),
        (["--to", "dc1"], "--to dc1"),
        (["--from", "dc2"], "--from dc2"),
    ],
)
def test_resume_given_another_flow_than_the_run_is_refused_before_anything(
    tmp_path: Path, given: list[str], says: str
) -> None:
    """M6 (issue 45): --from/--to beside --resume were silently ignored - the operator who
    meant the other direction resumed (or abandoned) a run they did not mean."""
    config, run_id = _store_with_a_failed_run(tmp_path)
    state = ["--state-dir", str(tmp_path / "state")]
    result = CliRunner().invoke(cli, [*state, "failover", "--resume", str(run_id), *given,
                                      "--yes", "--config", str(config)])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"run {run_id} moves dc1 -> dc2" in result.output and says in result.output
    assert "Traceback" not in result.output
    shown = CliRunner().invoke(cli, [*state, "failover", "show", str(run_id), "-o", "json",
                                     "--config", str(config)])  # fmt: skip
    assert json.loads(shown.stdout)["state"] == "failed"  # not abandoned: nothing was done


def test_abandon_gives_an_unfinished_run_up_and_records_who_and_why(tmp_path: Path) -> None:
    config, run_id = _store_with_a_failed_run(tmp_path)
    state = ["--state-dir", str(tmp_path / "state")]
    result = CliRunner().invoke(cli, [*state, "failover", "abandon", str(run_id), "--reason",
                                      "moved by hand", "--yes", "-o", "json",
                                      "--config", str(config)])  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)  # stderr carries the log line
    assert document["state"] == "abandoned"
    assert document["result"]["abandoned"]["reason"] == "moved by hand"
    assert document["result"]["abandoned"]["by"].startswith("cli")
    missing = CliRunner().invoke(cli, [*state, "failover", "abandon", "99", "--reason", "x",
                                       "--yes", "--config", str(config)])  # fmt: skip
    assert missing.exit_code == 2 and "no failover run 99" in missing.output


# -- operator input that once ended in a traceback or a silent fresh store (issue 25) --------

_CONFIG = (
    "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
    "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
)


@pytest.mark.parametrize("command", [["config", "validate"], ["config", "show", "--config"]])
def test_a_config_that_is_not_utf8_is_named_with_its_line(
    tmp_path: Path, command: list[str]
) -> None:
    latin1 = tmp_path / "drkit.yaml"
    latin1.write_bytes(_CONFIG.encode() + "# café\n".encode("latin-1"))
    result = CliRunner().invoke(cli, [*command, str(latin1)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"{latin1}: not UTF-8 text: byte 0xe9 on line 4" in result.output


@pytest.mark.parametrize("state_dir", ["/proc/drkit-x", "/etc/passwd/x"])
def test_a_state_dir_that_cannot_be_created_is_named(tmp_path: Path, state_dir: str) -> None:
    config = tmp_path / "drkit.yaml"
    config.write_text(_CONFIG)
    result = CliRunner().invoke(
        cli, ["--state-dir", state_dir, "db", "upgrade", "--config", str(config)]
    )
    assert result.exit_code == 2, result.output
    assert f"--state-dir: cannot create {state_dir}" in result.output


@pytest.mark.parametrize("command", [["failover", "list"], ["failover", "show"], ["drill", "list"]])
def test_a_mistyped_state_dir_is_reported_not_answered_from_a_fresh_store(
    tmp_path: Path, command: list[str]
) -> None:
    config = tmp_path / "drkit.yaml"
    config.write_text(_CONFIG)
    typo = tmp_path / "sate"
    result = CliRunner().invoke(cli, ["--state-dir", str(typo), *command, "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert f"--state-dir: {typo} does not exist (a typo?)" in result.output
    assert not typo.exists()  # nothing created behind the operator's back


def test_a_drill_given_a_directory_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["drill", "run", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert f"{tmp_path}: is a directory, not a file" in result.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["failover", "--from", "dc1", "--to", "dc1", "--plan"], "--from/--to: both name dc1"),
        (["failover", "--from", "dc9", "--to", "dc1", "--plan"], "--from: unknown cluster 'dc9'"),
        (["failback", "--to", "dc9", "--plan"], "--to: unknown cluster 'dc9' (clusters: dc1, dc2)"),
    ],
)
def test_a_mistaken_move_names_the_option_at_fault(
    tmp_path: Path, args: list[str], says: str
) -> None:
    config = tmp_path / "drkit.yaml"
    config.write_text(_CONFIG + "flows: [{source: dc1, target: dc2}]\n")
    result = CliRunner().invoke(cli, ["--state-dir", str(tmp_path), *args, "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert says in result.output


@pytest.mark.parametrize(
    ("topic", "says"),
    [
        ("dc9:tail", "--export-topic: unknown cluster 'dc9' (clusters: dc1, dc2)"),
        ("tail", "--export-topic: 'tail' is not CLUSTER:TOPIC"),
        ("dc1:", "--export-topic: 'dc1:' is not CLUSTER:TOPIC"),
        ("dc1:no such topic", "--export-topic: 'no such topic' is not a valid topic name"),
    ],
)
@pytest.mark.parametrize("plan", [True, False])
def test_a_failback_export_topic_is_checked_before_anything(
    tmp_path: Path, topic: str, says: str, plan: bool
) -> None:
    """M7, W6 (issue 45): --plan did not look at --export-topic, and the run refused an
    unknown cluster only inside its export step - rolled back, exit 6."""
    config = tmp_path / "drkit.yaml"
    config.write_text(_CONFIG + "flows: [{source: dc1, target: dc2}, {source: dc2, target: dc1}]\n")
    result = CliRunner().invoke(cli, ["--state-dir", str(tmp_path), "failback", "--to", "dc1",
                                      "--from", "dc2", "--export-topic", topic,
                                      "--plan" if plan else "--yes",
                                      "--config", str(config)])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert not (tmp_path / "drkit.db").exists()  # nothing done: not even a store opened


def test_a_failback_never_writes_its_tail_over_an_existing_file(tmp_path: Path) -> None:
    """The tail is the only copy of records nobody replicated: on main a second failback given
    the first one's ``--export-file`` wrote over it.  Refused before anything is done."""
    config = tmp_path / "drkit.yaml"
    config.write_text(_CONFIG + "flows: [{source: dc1, target: dc2}, {source: dc2, target: dc1}]\n")
    earlier = tmp_path / "tail.jsonl"
    earlier.write_text('{"an": "earlier tail"}\n')
    result = CliRunner().invoke(cli, ["--state-dir", str(tmp_path), "failback", "--to", "dc1",
                                      "--from", "dc2", "--export-file", str(earlier), "--yes",
                                      "--config", str(config)])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"--export-file: {earlier} exists (an earlier tail?)" in result.output
    assert earlier.read_text() == '{"an": "earlier tail"}\n'
    assert not (tmp_path / "drkit.db").exists()  # nothing done: not even a store opened


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (
            "drills: {schedule: [{scenario: nope, cron: '0 3 * * *'}]}\n",
            "drills.schedule[0].scenario: no scenario 'nope'",
        ),
        (
            "state_store: {url: 'mysql://u:p@h/db'}\n",
            "state_store.url: mysql is not supported: drkit's store runs on sqlite or postgresql",
        ),
    ],
)
def test_config_validate_catches_what_would_fail_later(
    tmp_path: Path, extra: str, says: str
) -> None:
    config = tmp_path / "drkit.yaml"
    config.write_text(_CONFIG + extra)
    result = CliRunner().invoke(cli, ["config", "validate", str(config)])
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert "u:p" not in result.output


def test_status_exits_3_when_the_active_cluster_answers_nobody(tmp_path: Path) -> None:
    """Once it exited 0 with every cluster down: scripts had to parse the text."""
    config = tmp_path / "drkit.yaml"
    config.write_text(_CONFIG + "flows: [{source: dc1, target: dc2}]\n")
    result = CliRunner().invoke(cli, ["--state-dir", str(tmp_path), "status", "--config",
                                      str(config)])  # fmt: skip
    assert result.exit_code == 3, result.output
    assert "probe failed (1 of 3 in a row to be UNAVAILABLE); still UNKNOWN" in result.output


def test_force_is_refused_with_its_new_name(tmp_path: Path) -> None:
    """--force read like patronictl's "skip the prompt"; it overwrote live groups' offsets."""
    config = tmp_path / "drkit.yaml"
    config.write_text(_CONFIG + "flows: [{source: dc1, target: dc2}]\n")
    result = CliRunner().invoke(cli, ["switchover", "--from", "dc1", "--to", "dc2", "--force",
                                      "--config", str(config)])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--force: renamed --overwrite-active-groups (--yes skips the prompt)" in result.output


def test_automation_commands_live_under_their_own_name(tmp_path: Path) -> None:
    """A top-level 'drkit resume' read like 'drkit failover --resume RUN'."""
    from drkit.automation.journal import AutomationJournal

    config = tmp_path / "drkit.yaml"
    config.write_text(_CONFIG + f"state_store: {{url: 'sqlite:///{tmp_path / 'd.db'}'}}\n"
                      "failover: {automatic: true, allow_single_observer: true}\n")  # fmt: skip
    runner, base = CliRunner(), ["automation"]
    paused = runner.invoke(cli, [*base, "pause", "-m", "dc maintenance", "--config", str(config)])
    assert paused.exit_code == 0, paused.output
    journal = AutomationJournal(StateStore(f"sqlite:///{tmp_path / 'd.db'}"))
    pause = journal.paused()
    assert pause is not None and pause.reason == "dc maintenance"
    resumed = runner.invoke(cli, [*base, "resume", "--config", str(config)])
    assert resumed.exit_code == 0 and journal.paused() is None, resumed.output
    assert runner.invoke(cli, ["resume"]).exit_code == 2  # no such command any more


def test_automation_resume_with_automation_off_in_the_config_is_refused(tmp_path: Path) -> None:
    """W6 (issue 45): 'automation resume' said "automatic failover resumed" (exit 0) with
    failover.automatic off - nothing was switched on; it is refused, storing nothing (and so is
    'automation pause': a pause nothing could lift - test_fourth_trial_inputs.py)."""
    from drkit.automation.journal import AutomationJournal

    config = tmp_path / "drkit.yaml"
    config.write_text(_CONFIG + f"state_store: {{url: 'sqlite:///{tmp_path / 'd.db'}'}}\n")
    runner, base = CliRunner(), ["automation"]
    resumed = runner.invoke(cli, [*base, "resume", "--config", str(config)])
    assert resumed.exit_code == 2, resumed.output
    assert "automatic failover is not enabled in the config" in resumed.output
    assert "failover.automatic" in resumed.output and "Traceback" not in resumed.output
    journal = AutomationJournal(StateStore(f"sqlite:///{tmp_path / 'd.db'}"))
    assert journal.paused() is None and journal.unacknowledged() == ()  # nothing stored


def test_small_commands_answer_json_in_the_one_envelope(tmp_path: Path) -> None:
    config = tmp_path / "drkit.yaml"
    config.write_text(_CONFIG + f"state_store: {{url: 'sqlite:///{tmp_path / 'd.db'}'}}\n"
                      "failover: {automatic: true, allow_single_observer: true}\n")  # fmt: skip
    runner, at = CliRunner(), ["--config", str(config)]
    for args, kind in [
        (["config", "validate", str(config)], "config.validate"),
        (["db", "upgrade", *at], "db"),
        (["db", "current", *at], "db"),
        (["automation", "pause", "-m", "why", *at], "automation"),
        (["automation", "resume", *at], "automation"),
    ]:
        result = runner.invoke(cli, [*args, "-o", "json"])
        assert result.exit_code == 0, (args, result.output)
        document = json.loads(result.output)
        assert document["schema"] == f"drkit.{kind}/v1", args
        assert document["generated_at"].endswith("Z") and "T" in document["generated_at"]
    assert document["paused"] is None  # resumed last
    current = json.loads(runner.invoke(cli, ["db", "current", *at, "-o", "json"]).output)
    assert current["revision"] == current["head"] is not None


def test_one_exit_code_table_in_every_help_and_the_readme() -> None:
    from drkit.errors import EXIT_CODES_TEXT, EXIT_MEANINGS

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for code, meaning in EXIT_MEANINGS.items():
        assert f"| {code.value} | {meaning} |" in readme
    assert len(set(EXIT_MEANINGS.values())) == len(EXIT_MEANINGS)  # one meaning per number
    for path in [(), *all_commands(cli)]:
        shown = CliRunner().invoke(cli, [*path, "--help"], terminal_width=120).output
        assert EXIT_CODES_TEXT.splitlines()[9].strip() in shown, path


def test_shell_completion_offers_aliases_flows_and_runs(tmp_path: Path) -> None:
    """_DRKIT_COMPLETE=bash_source drkit prints the script; these are the answers it asks for."""
    config = tmp_path / "drkit.yaml"
    config.write_text(_CONFIG + "flows: [{source: dc1, target: dc2}]\n"
                      f"state_store: {{url: 'sqlite:///{tmp_path / 'd.db'}'}}\n")  # fmt: skip

    def complete(words: str) -> list[str]:
        cword = str(len(words.split(" ")) - 1)
        env = {"_DRKIT_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": cword,
               "DRKIT_CONFIG": str(config)}  # fmt: skip
        result = CliRunner().invoke(cli, [], env=env, prog_name="drkit")
        return [line.split(",", 1)[1] for line in result.output.splitlines() if "," in line]

    assert complete("drkit failover --from ") == ["dc1", "dc2"]
    assert complete("drkit switchover --to d") == ["dc1", "dc2"]
    assert complete("drkit verify --flow ") == ["dc1:dc2"]  # no shell quoting needed
    assert complete("drkit failover show ") == []  # no runs yet: nothing offered, no error


def test_acls_lists_an_optional_grant_apart_and_adds_it_only_when_asked(tmp_path: Path) -> None:
    """The checkpointer under ``checkpoint_commits_from: auto`` may follow the log: READ on
    ``__consumer_offsets`` is printed as a comment, not among the needs, unless
    --with-optional (which --apply would then create too)."""
    config = tmp_path / "drkit.yaml"
    config.write_text(
        "clusters:\n"
        "  dc1: {bootstrap_servers: 'a:9092', principals: {checkpointer: 'User:cp'}}\n"
        "  dc2: {bootstrap_servers: 'b:9092'}\n"
        "flows:\n  - {source: dc1, target: dc2}\n"
    )
    base = ["acls", "--config", str(config), "--role", "checkpointer", "--cluster", "dc1"]
    plain = CliRunner().invoke(cli, base)
    assert plain.exit_code == 0, plain.output
    needed = [line for line in plain.output.splitlines() if not line.startswith("#")]
    assert needed and not [line for line in needed if "__consumer_offsets" in line]
    assert "# optional (--with-optional): ALLOW User:cp READ on topic '__consumer_offsets'" in (
        plain.output
    )
    document = json.loads(CliRunner().invoke(cli, [*base, "-o", "json"]).output)
    assert [o["operation"] for o in document["optional"]] == ["read", "describe"]
    assert not [a for a in document["acls"] if a["resource"] == "__consumer_offsets"]
    wanted = json.loads(CliRunner().invoke(cli, [*base, "--with-optional", "-o", "json"]).output)
    granted = [a["operation"] for a in wanted["acls"] if a["resource"] == "__consumer_offsets"]
    assert granted == ["read", "describe"]


def test_failover_list_summarises_each_run_without_its_per_group_rows(tmp_path: Path) -> None:
    """``failover list`` is a summary: each run's groups are counted (``group_rows``), not
    listed - at 10,000 groups a run's rows took 1.5 s to read, per run listed, even for the text
    table; ``failover show RUN -o json`` has them."""
    from drkit.failover.model import GroupMove, PartitionMove, Plan, Procedure
    from drkit.failover.runs import RunRepository
    from drkit.store import StateStore

    db = tmp_path / "drkit.db"
    config = tmp_path / "c.yaml"
    config.write_text(_CONFIG + f"state_store: {{url: 'sqlite:///{db}'}}\n")
    store = StateStore(f"sqlite:///{db}")
    store.upgrade()
    moves = tuple(
        GroupMove(
            f"g{i}", "empty", False, (PartitionMove("t", 0, "dc1.t", 0, i, i, "exact", 0, 0),)
        )
        for i in range(3)
    )
    plan = Plan(
        procedure=Procedure.FAILOVER, source="dc1", target="dc2", flow="dc1->dc2",
        reverse_flow=None, source_reachable=False, translation_mode="checkpoints", steps=(),
        groups=moves, groups_without_checkpoint=(), rpo=(), findings=(), pointer_from="dc1",
        pointer_to="dc2",
    )  # fmt: skip
    run = RunRepository(store).create(plan, "test", "")
    store.engine.dispose()
    listed = CliRunner().invoke(cli, ["failover", "list", "-o", "json", "--config", str(config)])
    assert listed.exit_code == 0, listed.output
    [summary] = json.loads(listed.output)["runs"]
    assert summary["id"] == run.id and summary["plan"]["group_rows"] == 3
    assert "groups" not in summary["plan"]
    shown = CliRunner().invoke(cli, ["failover", "show", str(run.id), "-o", "json",
                                     "--config", str(config)])  # fmt: skip
    assert [g["group"] for g in json.loads(shown.output)["plan"]["groups"]] == ["g0", "g1", "g2"]


def test_verify_names_a_refused_cluster_with_exit_3_before_the_store(tmp_path: Path) -> None:
    """Issue 45: verify against a source that refuses connections exited 1 ("the operation
    failed", an accounting failure wrapping the client's timeout) - a cluster down is 3."""
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n"
    )
    for extra in ([], ["--write-spec", str(tmp_path / "spec.json")]):
        result = CliRunner().invoke(
            cli, ["--state-dir", str(tmp_path / "s"), "verify", "--config", str(config), "--flow",
                  "dc1->dc2", "--spark-master", "local[1]", *extra],
        )  # fmt: skip
        assert result.exit_code == 3, result.output
        assert "cluster 'dc1' at 127.0.0.1:1 is unreachable" in result.output, result.output
        assert "Traceback" not in result.output
        assert not (tmp_path / "s" / "drkit.db").exists()  # refused before the store was opened


def test_verify_refuses_topics_that_name_no_topic(tmp_path: Path) -> None:
    """The fourth new-user trial: `verify --topics ''` meant every topic and ran a 54 s job."""
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n"
    )
    for empty in ("", " , "):
        result = CliRunner().invoke(
            cli, ["--state-dir", str(tmp_path / "s"), "verify", "--config", str(config), "--flow",
                  "dc1->dc2", "--topics", empty],
        )  # fmt: skip
        assert result.exit_code == 2, result.output
        assert "--topics: names no topic (leave it out to check all)" in result.output
