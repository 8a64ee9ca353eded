"""Loss events recorded in the store show in /api/status, on the page and in `drkit status`."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from drkit.cli import cli
from drkit.config import load_config
from drkit.records import TopicPartition
from drkit.replication.loss import LossEvent, LossReason
from drkit.replication.loss_repo import LossRepository
from drkit.status import current_status
from drkit.status.web import render_page
from drkit.store import StateStore

DETECTED_MS = 1_700_000_000_000


def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
        "flows: [{source: dc1, target: dc2}, {source: dc2, target: dc1}]\n"
        f"state_store: {{url: 'sqlite:///{tmp_path / 'drkit.db'}'}}\n"
    )
    return path


def record_losses(tmp_path: Path) -> StateStore:
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    repo = LossRepository(store)
    orders = TopicPartition("orders", 2)
    assert repo.record(
        LossEvent("dc1->dc2", orders, 100, 149, LossReason.TRUNCATED, DETECTED_MS, "w1")
    )
    assert repo.record(
        LossEvent("dc1->dc2", TopicPartition("payments", 0), 0, 6, LossReason.RECREATED,
                  DETECTED_MS + 5000, "w2", "old-topic-id")
    )  # fmt: skip
    return store


def test_status_document_lists_each_flows_losses(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path))
    store = record_losses(tmp_path)
    picture = current_status(config, store).to_json()
    lossy, clean = picture["flows"]["dc1->dc2"], picture["flows"]["dc2->dc1"]
    assert lossy["lost_records"] == 57
    assert lossy["losses"] == [
        {"topic": "orders", "partition": 2, "first_offset": 100, "last_offset": 149,
         "count": 50, "reason": "truncated", "detected_at": "2023-11-14T22:13:20.000Z",
         "detected_by": "w1"},
        {"topic": "payments", "partition": 0, "first_offset": 0, "last_offset": 6,
         "count": 7, "reason": "recreated", "detected_at": "2023-11-14T22:13:25.000Z",
         "detected_by": "w2"},
    ]  # fmt: skip
    assert (clean["lost_records"], clean["losses"]) == (0, [])
    json.dumps(picture)  # the document stays plain JSON

    page = render_page(picture)
    # The lossy flow's row is marked and says how many records were lost; the clean one not.
    assert '<tr data-flow="dc1-&gt;dc2" class="loss">' in page
    assert '<tr data-flow="dc2-&gt;dc1">' in page
    assert "57 records lost" in page
    assert page.count('<span class="state LOSS">50</span>') == 1
    assert "100..149" in page and "0..6" in page


def test_drkit_status_prints_the_losses(tmp_path: Path) -> None:
    path = config_file(tmp_path)
    record_losses(tmp_path)
    runner = CliRunner()
    text = runner.invoke(cli, ["status", "--config", str(path), "--no-probe"])
    assert text.exit_code == 0, text.output
    lossy = text.output.split("dc1->dc2", 1)[1].split("dc2->dc1", 1)[0]
    assert "57" in lossy and "orders[2]" in lossy and "100..149" in lossy
    assert "payments[0]" in lossy and "0..6" in lossy
    as_json = runner.invoke(cli, ["status", "--config", str(path), "--no-probe", "-o", "json"])
    assert json.loads(as_json.output)["flows"]["dc1->dc2"]["lost_records"] == 57


def test_status_shows_lag_per_topic_and_each_group(tmp_path: Path) -> None:
    """What only the JSON had: lag per source topic and, per group, its lag status and what
    moving it now would cost."""
    from drkit.store.health_repo import HealthRepository

    path = config_file(tmp_path)
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    data = {
        "lag_records": 12, "lag_exact": True, "lag_by_topic": {"orders": 9, "payments": 3},
        "groups": {"billing": {"partitions": 4, "rereads": 2, "unreplicated": 0}},
        "group_lag": {"billing": "OK", "audit": "STALL"},
    }  # fmt: skip
    HealthRepository(store).save_flow_status("o1", "dc1->dc2", 1_700_000_000.0, data)
    result = CliRunner().invoke(cli, ["status", "--no-probe", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert "    lag by topic: orders 9, payments 3" in result.output
    assert ("    group billing: lag OK; moving it now: 2 re-read, 0 not replicated "
            "(4 partitions checkpointed)") in result.output  # fmt: skip
    assert "    group audit: lag STALL; no checkpoint yet" in result.output
    # The status page shows the same, per group.
    page = render_page(current_status(load_config(path), store).to_json())
    assert '<tr data-flow="dc1-&gt;dc2" data-group="billing">' in page
    billing = page.split('data-group="billing">', 1)[1].split("</tr>", 1)[0]
    assert '<span class="state HEALTHY">OK</span>' in billing
    assert "2 re-read, 0 not replicated (4 partitions checkpointed)" in billing
    audit = page.split('data-group="audit">', 1)[1].split("</tr>", 1)[0]
    assert '<span class="state UNAVAILABLE">STALL</span>' in audit and "no checkpoint yet" in audit
    assert "lag by topic: orders 9, payments 3" in page
    assert "    config drift: not compared yet" in result.output  # an older row: no drift key


def test_status_shows_config_drift_on_the_terminal_the_page_and_in_json(tmp_path: Path) -> None:
    """How the replicas differ from their source topics, as the monitor last compared them:
    listed (the first ones, and how many in all) wherever status is read."""
    from drkit.store.health_repo import HealthRepository

    path = config_file(tmp_path)
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    repo = HealthRepository(store)
    drifted = {"drift": ["dc1.orders retention.ms=99 (source: 10)", "dc1.audit missing"],
               "drift_total": 3}  # fmt: skip
    repo.save_flow_status("o1", "dc1->dc2", 1_700_000_000.0, drifted)
    repo.save_flow_status("o1", "dc2->dc1", 1_700_000_000.0, {"drift": [], "drift_total": 0})
    result = CliRunner().invoke(cli, ["status", "--no-probe", "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert ("    CONFIG DRIFT 3: dc1.orders retention.ms=99 (source: 10); dc1.audit missing; "
            "and 1 more") in result.output  # fmt: skip
    assert "    config drift: none (replicas match their source topics)" in result.output
    picture = current_status(load_config(path), store).to_json()
    assert picture["flows"]["dc1->dc2"]["drift"] == drifted["drift"]
    assert picture["flows"]["dc1->dc2"]["drift_total"] == 3
    page = render_page(picture)
    assert '<span class="state DEGRADED">3</span>' in page and "and 1 more" in page


def test_status_colours_states_on_a_terminal_only(tmp_path: Path) -> None:
    path = config_file(tmp_path)
    record_losses(tmp_path)
    runner = CliRunner()
    args = ["status", "--config", str(path), "--no-probe"]
    plain = runner.invoke(cli, args)  # not a terminal: no escape codes for a pipe or a file
    assert plain.exit_code == 0 and "\x1b[" not in plain.output
    coloured = runner.invoke(cli, [*args, "--color"], color=True)
    assert coloured.exit_code == 0, coloured.output
    assert "\x1b[31m\x1b[1mLOST\x1b[0m 57 records" in coloured.output  # the loss in bold red
    assert click.unstyle(coloured.output) == plain.output


def test_status_watch_redraws_until_ctrl_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = config_file(tmp_path)
    record_losses(tmp_path)
    naps: list[float] = []

    def sleep(seconds: float) -> None:  # the operator presses Ctrl-C during the third wait
        naps.append(seconds)
        if len(naps) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr("drkit.cli.monitor_cmd._between_redraws", sleep)
    args = ["status", "--config", str(path), "--no-probe", "--watch", "2"]
    watched = CliRunner().invoke(cli, [*args, "-o", "json"])
    assert watched.exit_code == 0, watched.output
    documents = [json.loads(line) for line in watched.output.splitlines()]
    assert [d["flows"]["dc1->dc2"]["lost_records"] for d in documents] == [57, 57, 57]
    assert naps == [2.0, 2.0, 2.0]
    refused = CliRunner().invoke(cli, [*args[:-1], "0"])
    assert refused.exit_code == 2 and "--watch" in refused.output


def test_status_summarises_thousands_of_groups_and_lists_the_worst_first(tmp_path: Path) -> None:
    """At 10,000 groups one line each is unreadable: counts per lag status, then the worst
    groups (stopped and stalled first), and where the rest are."""
    from drkit.store.health_repo import HealthRepository

    path = config_file(tmp_path)
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    group_lag = {f"app-{i:05d}": "OK" for i in range(2_500)}
    group_lag |= {"app-00007": "STALL", "app-02001": "STOP", "app-00100": "WARN"}
    data = {"lag_records": 0, "lag_exact": True, "groups": {}, "group_lag": group_lag}
    HealthRepository(store).save_flow_status("o1", "dc1->dc2", 1_700_000_000.0, data)
    result = CliRunner().invoke(cli, ["status", "--no-probe", "--config", str(path)])
    assert result.exit_code == 0, result.output
    flow = result.output.split("dc1->dc2", 1)[1]
    assert "groups: 2,500 (OK 2,497, STALL 1, STOP 1, WARN 1); the worst 20 first" in flow
    listed = [line.split()[1].rstrip(":") for line in flow.splitlines() if "    group " in line]
    assert listed[:3] == ["app-02001", "app-00007", "app-00100"] and len(listed) == 20
    assert "... 2,480 more groups" in flow
    # The status page: the same counts, the worst 20 rows, the rest in /api/status.
    page = render_page(current_status(load_config(path), store).to_json())
    assert "2,500 groups (OK 2,497, STALL 1, STOP 1, WARN 1); the worst 20 below" in page
    assert page.count('data-group="app-') == 20 and 'data-group="app-02001"' in page


def test_status_text_escapes_names_it_did_not_choose(tmp_path: Path) -> None:
    """Group and topic names, errors and reasons are anyone's text: one holding a newline would
    forge a status line, one holding ESC or BEL would drive the operator's terminal. Printed
    escaped, on a terminal (colours kept) and off one."""
    from drkit.store.health_repo import HealthRepository

    path = config_file(tmp_path)
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    forged = "evil\n    group payments: lag OK; nothing to worry about"
    title = "t\x1b]0;pwned\x07"
    data = {
        "lag_records": 1, "lag_exact": True, "lag_by_topic": {"orders\r": 1},
        "group_lag": {forged: "STALL", title: "OK"},
        "drift": ["dc1.x\x1b[8mhidden"], "drift_total": 1,
    }  # fmt: skip
    HealthRepository(store).save_flow_status("o1", "dc1->dc2", 1_700_000_000.0, data)
    args = ["status", "--no-probe", "--config", str(path)]
    plain = CliRunner().invoke(cli, args)
    coloured = CliRunner().invoke(cli, [*args, "--color"], color=True)
    for output in (plain, coloured):
        assert output.exit_code == 0, output.output
        text = click.unstyle(output.output)
        assert "    group payments: lag OK" not in text.splitlines(), text
        assert "group evil\\n    group payments: lag OK; nothing to worry about: lag STALL" in text
        assert "group t\\x1b]0;pwned\\x07: lag OK" in text
        assert "orders\\r 1" in text and "dc1.x\\x1b[8mhidden" in text
        assert "\x07" not in output.output and "\x1b]" not in output.output
        assert "\x1b[8m" not in output.output and "\r" not in output.output
