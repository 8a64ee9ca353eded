"""``drkit status`` without a monitor probes on its own - as one observer per host, never a
vote.  Once every call registered a new ``cli-<host>-<pid>`` observer: the list grew forever,
its failure count restarted at 1 (status alone could never say UNAVAILABLE), and ``--watch``
redrew the first picture for good."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from drkit.cli import cli
from drkit.config import load_config_text
from drkit.health.identity import cli_observer, is_vote
from drkit.status.document import build_status
from drkit.store import StateStore
from drkit.store.health_repo import HealthRepository
from tests.replication_support import free_ports

CONFIG = """
clusters:
  dc1: {bootstrap_servers: "127.0.0.1:1"}
  dc2: {bootstrap_servers: "127.0.0.1:2"}
flows: [{source: dc1, target: dc2}]
health: {probe_timeout_s: 0.5, failure_threshold: 3}
"""


def _status(tmp_path: Path, *extra: str) -> dict[str, object]:
    path = tmp_path / "drkit.yaml"
    path.write_text(CONFIG)
    done = CliRunner().invoke(cli, ["--state-dir", str(tmp_path), "status", "--config",
                                    str(path), "-o", "json", *extra])  # fmt: skip
    assert done.exit_code == 3, done.output  # dc1, the active cluster, answers nobody
    document: dict[str, object] = json.loads(done.stdout)
    return document


def test_status_probes_as_one_observer_per_host_whose_failures_add_up(tmp_path: Path) -> None:
    for call in range(1, 4):
        document = _status(tmp_path)
        assert document["observers"] == [cli_observer()], document["observers"]
        dc1 = document["clusters"]["dc1"]  # type: ignore[index]
        mine = dc1["observers"][cli_observer()]
        expected = "UNAVAILABLE" if call == 3 else "UNKNOWN"
        assert mine["state"] == expected, (call, mine)
        # Its own view is shown and makes status exit 3 - but it is no vote: no quorum
        # agrees from it, nothing automatic acts on it.
        assert dc1["state"] == "UNKNOWN" and dc1["down_votes"] == [], dc1
    rows = HealthRepository(StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")).all_observer_states()
    assert {row.observer for row in rows} == {cli_observer()}


def test_watch_without_a_monitor_probes_on_every_redraw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    naps: list[float] = []

    def nap(seconds: float) -> None:
        naps.append(seconds)
        if len(naps) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr("drkit.cli.monitor_cmd._between_redraws", nap)
    path = tmp_path / "drkit.yaml"
    path.write_text(CONFIG)
    done = CliRunner().invoke(cli, ["--state-dir", str(tmp_path), "status", "--config",
                                    str(path), "-o", "json", "--watch", "1"])  # fmt: skip
    reasons = [json.loads(line)["clusters"]["dc1"]["observers"][cli_observer()]["reason"]
               for line in done.stdout.splitlines()]  # fmt: skip
    assert len(reasons) == 2 and "1 of 3" in reasons[0] and "2 of 3" in reasons[1], reasons


def test_a_cli_observer_is_no_vote_and_no_monitor_may_take_its_name(tmp_path: Path) -> None:
    assert not is_vote(cli_observer()) and is_vote("site-a")
    path = tmp_path / "drkit.yaml"
    path.write_text(CONFIG)
    # --listen on a free port: the default (9464) may be any monitor's on this machine.
    refused = CliRunner().invoke(cli, ["--state-dir", str(tmp_path), "monitor", "--config",
                                       str(path), "--observer", "cli:laptop",
                                       "--listen", f"127.0.0.1:{free_ports()}"])  # fmt: skip
    assert refused.exit_code == 2 and "never a vote" in refused.output, refused.output
    config = load_config_text(CONFIG, env={})
    assert build_status is not None and config.health.failure_threshold == 3


def test_status_runs_every_probe_at_once() -> None:
    """Issue 45 (seventh trial): the probes ran one after another, each bounded by the probe
    timeout, so a config with one cluster down, frozen or not Kafka answered in 3-12 s.  Every
    job must be under way before any of them ends: each here waits for all the others to
    start (a barrier), which one-after-another never lets happen."""
    import threading

    from drkit.cli.monitor_cmd import run_all_at_once

    jobs = ["probe:dc1", "probe:dc2", "flow:dc1->dc2"]
    everyone = threading.Barrier(len(jobs), timeout=10)
    ran: list[str] = []

    def run(job: str) -> None:
        everyone.wait()
        ran.append(job)

    run_all_at_once(run, jobs)
    assert sorted(ran) == sorted(jobs)


def test_status_probing_on_its_own_waits_for_an_answer_no_longer_than_its_bound() -> None:
    """A hung or not-Kafka cluster held ``drkit status`` for the whole probe timeout (4 s by
    default) after drkit's own start: it must be named within 3 s (issue 45).  The monitor's
    configured timeout is not changed, a shorter one is kept."""
    from drkit.cli.monitor_cmd import _answering_quickly
    from drkit.kafka.clients import FIRST_ANSWER_S as STATUS_PROBE_S

    default = load_config_text(CONFIG.replace("probe_timeout_s: 0.5, ", ""), env={})
    assert default.health.probe_timeout_s > STATUS_PROBE_S
    assert _answering_quickly(default).health.probe_timeout_s == STATUS_PROBE_S
    assert _answering_quickly(default).clusters == default.clusters
    short = load_config_text(CONFIG, env={})
    assert _answering_quickly(short) is short
