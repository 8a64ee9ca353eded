"""Failpoints (drkit.failpoints): armed only through DRKIT_FAILPOINTS, typos refused."""

from __future__ import annotations

import threading

import pytest
from click.testing import CliRunner

from drkit import failpoints
from drkit.cli import cli
from drkit.errors import ConfigError, FailpointError


def test_nothing_is_armed_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(failpoints.ENVIRONMENT, raising=False)
    assert failpoints.armed() == {}
    failpoints.reach("reconcile.after_acls")  # does nothing


def test_an_armed_error_failpoint_raises_naming_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(failpoints.ENVIRONMENT, " reconcile.after_acls = error ; ")
    assert failpoints.armed() == {"reconcile.after_acls": "error"}
    monkeypatch.setattr(failpoints, "_fired", set())
    with pytest.raises(FailpointError, match=r"reconcile\.after_acls"):
        failpoints.reach("reconcile.after_acls")
    failpoints.reach("reconcile.after_acls")  # once per process: the rollback passes again


def test_an_armed_hang_failpoint_blocks_only_the_thread_that_reaches_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(failpoints.ENVIRONMENT, "source_consumer.close=hang")
    monkeypatch.setattr(failpoints, "_fired", set())
    passed = threading.Event()

    def close() -> None:
        failpoints.reach("source_consumer.close")
        passed.set()

    thread = threading.Thread(target=close, daemon=True)
    thread.start()
    thread.join(0.3)
    assert thread.is_alive() and not passed.is_set()  # blocked for good, as a hung call
    failpoints.reach("source_consumer.close")  # once per process: this thread goes on


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("fence_sourse.after_acls=error", "unknown failpoint 'fence_sourse.after_acls'"),
        ("reconcile.after_acls=explode", "action must be one of error, kill"),
        ("reconcile.after_acls", "action must be one of error, kill"),
    ],
)
def test_a_misspelt_failpoint_is_a_config_error(spec: str, reason: str) -> None:
    with pytest.raises(ConfigError) as raised:
        failpoints.armed(spec)
    assert reason in str(raised.value)


def test_the_cli_refuses_a_misspelt_failpoint_before_doing_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(failpoints.ENVIRONMENT, "no.such.place=kill")
    result = CliRunner().invoke(cli, ["config", "validate", "--config", "/nonexistent.yaml"])
    assert result.exit_code == 2
    assert "DRKIT_FAILPOINTS: unknown failpoint 'no.such.place'" in result.output
