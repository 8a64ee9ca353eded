"""Bad inputs from the fourth new-user trial (issue 45): tracebacks, a refusal that still stored
a failed drill, a pause that could not be lifted.  Each is now refused in one line naming the
cause (exit 2, nothing stored), run through the CLI as a user types them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from drkit.cli import cli

GOOD = (
    "clusters: {dc1: {bootstrap_servers: '127.0.0.1:1'}, dc2: {bootstrap_servers: '127.0.0.1:2'}}\n"
    "flows: [{source: dc1, target: dc2}]\n"
)
TOO_BIG = "9223372036854775808"  # SQLite INTEGER's maximum plus one


def _drkit(tmp_path: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--state-dir", str(tmp_path / "state"), *args])


def _refused(done: Result, *named: str) -> None:
    assert done.exit_code == 2, done.output
    assert "Traceback" not in done.output, done.output
    assert not isinstance(done.exception, Exception) or isinstance(done.exception, SystemExit), (
        done.exception
    )
    for text in named:
        assert text in done.output, done.output


def _config(tmp_path: Path, extra: str = "") -> list[str]:
    config = tmp_path / "c.yaml"
    config.write_text(GOOD + f"state_store: {{url: 'sqlite:///{tmp_path / 'd.db'}'}}\n" + extra)
    return ["--config", str(config)]


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200_000,
        "{a: " * 5_000 + "1" + "}" * 5_000,
        "- " * 2_000 + "x",
        "x: " + "[" * 150 + "]" * 150,
    ],
)
def test_a_config_nested_too_deeply_is_refused_in_one_line(tmp_path: Path, text: str) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text(text + "\n")
    _refused(_drkit(tmp_path, "config", "validate", str(deep)), "deep.yaml", "nested too deeply")
    done = _drkit(tmp_path, "config", "validate", str(deep), "-o", "json")
    assert done.exit_code == 2, done.output
    document = json.loads(done.stdout)
    assert document["ok"] is False and "nested too deeply" in document["problems"][0]
    done = _drkit(tmp_path, "status", "--config", str(deep), "-o", "json")
    assert done.exit_code == 2, done.output
    assert "nested too deeply" in json.loads(done.stdout)["errors"][0]


@pytest.mark.parametrize("run", ["999999999999999999999999", TOO_BIG, "0"])
def test_a_stored_id_outside_sqlites_integers_is_refused(tmp_path: Path, run: str) -> None:
    at = _config(tmp_path, "failover: {automatic: true, allow_single_observer: true}\n")
    for args in (["failover", "--resume", run, *at], ["failover", "show", run, *at],
                 ["failover", "abandon", run, "--reason", "x", "--yes", *at],
                 ["automation", "ack", run, "-m", "x", *at],
                 ["drill", "show", run, *at]):  # fmt: skip
        _refused(_drkit(tmp_path, *args), "1<=x<=9223372036854775807")


def test_the_largest_stored_id_is_taken_and_answered_as_unknown(tmp_path: Path) -> None:
    done = _drkit(tmp_path, "failover", "show", "9223372036854775807", *_config(tmp_path))
    assert done.exit_code != 0 and "Traceback" not in done.output, done.output
    assert "no such failover run" in done.output


def test_db_upgrade_refuses_an_empty_or_unknown_revision_naming_the_head(tmp_path: Path) -> None:
    _refused(_drkit(tmp_path, "db", "upgrade", "--revision", ""), "--revision", "empty")
    done = _drkit(tmp_path, "db", "upgrade", "--revision", "zzz")
    _refused(done, "--revision", "'zzz'", "head 0")
    assert len(done.output.strip().splitlines()) == 1, done.output


def test_config_import_refuses_an_empty_out_as_empty(tmp_path: Path) -> None:
    mm2 = tmp_path / "mm2.properties"
    mm2.write_text("clusters = dc1, dc2\ndc1.bootstrap.servers = a:9092\n"
                   "dc2.bootstrap.servers = b:9092\ndc1->dc2.enabled = true\n")  # fmt: skip
    done = _drkit(tmp_path, "config", "import", str(mm2), "--out", "")
    _refused(done, "--out: an empty path")
    assert "exists" not in done.output


@pytest.mark.parametrize(("source", "target"), [("dc1", "dc1"), ("dc2", "dc1"), ("dc9", "dc2")])
def test_a_readiness_refused_as_bad_input_stores_no_drill(
    tmp_path: Path, source: str, target: str
) -> None:
    at = _config(tmp_path)
    _refused(_drkit(tmp_path, "drill", "readiness", "--from", source, "--to", target, *at))
    listed = _drkit(tmp_path, "drill", "list", *at, "-o", "json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout)["drills"] == []


def test_automation_pause_is_refused_when_automation_is_off_and_an_old_pause_can_be_lifted(
    tmp_path: Path,
) -> None:
    from drkit.automation.journal import AutomationJournal
    from drkit.store import StateStore

    off = _config(tmp_path)
    assert _drkit(tmp_path, "db", "upgrade", *off).exit_code == 0
    _refused(_drkit(tmp_path, "automation", "pause", "-m", "maintenance", *off),
             "failover.automatic", "nothing was stored")  # fmt: skip
    journal = AutomationJournal(StateStore(f"sqlite:///{tmp_path / 'd.db'}"))
    assert journal.paused() is None
    # Nothing paused: resume has nothing to do, as before.
    _refused(_drkit(tmp_path, "automation", "resume", *off), "failover.automatic")
    # A pause stored while automation was on (then switched off in the config) is lifted.
    journal.pause("someone", "before switching automation off")
    done = _drkit(tmp_path, "automation", "resume", "-m", "tidy up", *off)
    assert done.exit_code == 0, done.output
    assert "pause lifted" in done.output and "failover.automatic" in done.output
    assert journal.paused() is None


@pytest.mark.parametrize("reason", ["", "   ", "a\nforged line", "x" * 100_000])
def test_automation_reasons_are_checked_like_every_other_reason(
    tmp_path: Path, reason: str
) -> None:
    from drkit.automation.journal import AutomationJournal
    from drkit.store import StateStore

    at = _config(tmp_path, "failover: {automatic: true, allow_single_observer: true}\n")
    assert _drkit(tmp_path, "db", "upgrade", *at).exit_code == 0
    for command in (["pause"], ["resume"], ["ack", "1"]):
        _refused(_drkit(tmp_path, "automation", *command, "-m", reason, *at), "--reason")
    _refused(_drkit(tmp_path, "flows", "pause", "dc1->dc2", "-m", reason, *at), "--reason")
    abandon = ["failover", "abandon", "1", "--reason", reason, "--yes", *at]
    _refused(_drkit(tmp_path, *abandon), "--reason")
    assert AutomationJournal(StateStore(f"sqlite:///{tmp_path / 'd.db'}")).paused() is None


def test_a_reason_of_a_thousand_characters_is_taken(tmp_path: Path) -> None:
    at = _config(tmp_path, "failover: {automatic: true, allow_single_observer: true}\n")
    done = _drkit(tmp_path, "automation", "pause", "-m", "y" * 1000, *at)
    assert done.exit_code == 0, done.output
    done = _drkit(tmp_path, "automation", "pause", *at)  # a reason stays optional here
    assert done.exit_code == 0, done.output
