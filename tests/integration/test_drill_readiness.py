"""The non-disruptive drill on real clusters: ready when replication, checkpoints and parity
are in place; groups are translated into shadow groups that vanish again; nothing moves."""

from __future__ import annotations

from pathlib import Path

import yaml

from drkit.drills.readiness import SHADOW_PREFIX
from drkit.drills.report import Verdict
from drkit.drills.service import run_readiness
from drkit.failover.pointer import PointerRepository
from drkit.kafka.admin import KafkaAdmin, TopicSpec
from drkit.store import StateStore
from tests.conftest import Names
from tests.failover_support import source_with_groups, wait_replicated
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import Replicator, flow_setup


def test_readiness_translates_into_shadow_groups_moves_nothing_and_finds_a_missing_replica(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("orders")
    pattern = f"{names.prefix}.*"
    setup = flow_setup(tmp_path, dc1, dc2, [pattern], groups={"include": [pattern]})
    groups = source_with_groups(setup, topic, names)
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    with Replicator(setup, log_dir=tmp_path):
        wait_replicated(setup, topic, groups)
        ready = run_readiness(
            setup.config, store, tmp_path / "state", setup.source, setup.target, connect=KafkaAdmin
        )
    report = ready.report
    assert report.verdict is Verdict.READY, report.checks
    shadow = next(c for c in report.checks if c.name == "shadow_translation")
    assert f"{len(groups)} groups" in shadow.detail
    target = dc2.admin()
    left = [g for g in target.list_groups() if g.startswith(SHADOW_PREFIX + names.prefix)]
    assert left == []  # shadow groups removed again
    for group in groups:  # the real groups were never written on the target
        assert target.group_offsets(group).offsets == {}
    assert PointerRepository(store).get() is None
    assert ready.html.exists() and report.mode == "readiness" and report.rto is None

    # A topic without its replica (no worker copies it now): not ready, and it says which.
    dc1.admin().create_topics([TopicSpec(names.topic("late"), 1)])
    late = run_readiness(
        setup.config, store, tmp_path / "state", setup.source, setup.target, connect=KafkaAdmin
    )
    assert late.report.verdict is Verdict.NOT_READY
    parity = next(c for c in late.report.checks if c.name == "topic_parity")
    assert not parity.passed and names.topic("late") in parity.detail


def test_a_monitor_runs_its_scheduled_readiness_and_shows_it_in_status_and_metrics(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """Issue 48, item 6: ``drills.schedule`` fires for real - a running monitor runs the
    readiness check at its minute, stores it, and its status and metrics show the outcome."""
    from drkit.drills.repo import DrillRepository
    from tests.integration.test_monitor import FAST_HEALTH, MonitorProcess
    from tests.replication_support import MetricsSnapshot, wait_until

    topic = names.topic("orders")
    pattern = f"{names.prefix}.*"
    setup = flow_setup(tmp_path, dc1, dc2, [pattern], groups={"include": [pattern]},
                       document_extra=FAST_HEALTH)  # fmt: skip
    groups = source_with_groups(setup, topic, names)
    document = yaml.safe_load(setup.path.read_text())
    document["drills"] = {"schedule": [
        {"cron": "* * * * *", "source": setup.source, "target": setup.target}
    ]}  # fmt: skip
    setup.path.write_text(yaml.safe_dump(document))
    store = StateStore(document["state_store"]["url"])
    with Replicator(setup, log_dir=tmp_path):
        wait_replicated(setup, topic, groups)
        with MonitorProcess(setup.path, "o1", tmp_path) as monitor:

            def stored() -> object:
                rows = [r for r in DrillRepository(store).latest(5) if r.finished_at]
                return rows[0] if rows else None

            try:  # the next whole minute, then the check itself
                row = wait_until(stored, 150, 1.0, what="a scheduled readiness stored")
            except AssertionError as err:
                raise AssertionError(f"{err}\n{monitor.log()[-4000:]}") from None
            assert row.name == "readiness" and row.verdict is Verdict.READY, row.summary()
            shown = wait_until(
                lambda: ((monitor.status() or {}).get("drills") or {}).get("readiness"),
                30, 0.5, what="the readiness in /api/status",
            )  # fmt: skip
            assert shown["id"] == row.id and shown["passed"] is True

            def gauge() -> float | None:
                text = monitor.get("/metrics").decode()
                return MetricsSnapshot.parse(text).value(
                    "drkit_drill_last_passed", kind="readiness"
                )

            assert wait_until(gauge, 30, 0.5, what="drkit_drill_last_passed") == 1.0
