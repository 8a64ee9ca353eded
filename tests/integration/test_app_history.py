"""Moves under a live application, its history checked Jepsen-style (tests/app_history.py).

The application writes and reads all through: a writer and a consumer group member follow the
pointer (they write and read on whatever cluster it names, moving when it moves), and a stale
writer keeps writing the home cluster as a forgotten instance would.  While each case runs,
every sample checks that no committed offset of the group moves backwards on either cluster and
that no cluster but the pointer's acknowledged a write sent after the pointer's cluster took
one; at the end, every acknowledged write was read by the group (nothing lost below the fence,
nothing skipped by a translation), and an exactly-once flow's replicas hold no record twice.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from drkit.kafka.admin import TopicSpec
from drkit.topology.flow import FlowTopology
from tests.app_history import AppHistory, duplicates
from tests.conftest import Names
from tests.failover_support import PARTITIONS, drkit
from tests.invariants import Cluster
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import Replicator, flow_setup, wait_until


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_a_switchover_and_back_under_a_live_application_loses_skips_and_rewinds_nothing(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path, exactly_once: bool
) -> None:
    topic, group = names.topic("orders"), names.group("app")
    setup = flow_setup(tmp_path, dc1, dc2, [re.escape(topic)], reverse=True,
                       groups={"include": [re.escape(group)]},
                       exactly_once=exactly_once)  # fmt: skip
    first, second = setup.source, setup.target
    forward = FlowTopology.of(setup.config.flows[0])
    backward = FlowTopology.of(setup.config.flows[1])
    dc1.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    dc2.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    clusters = {a: Cluster(a, setup.config.clusters[a].bootstrap_servers) for a in (first, second)}
    store_url = f"sqlite:///{tmp_path / 'drkit.db'}"
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: (tmp_path / "drkit.db").exists(), 60, what="the store")
        with AppHistory(
            store_url,
            clusters,
            {
                first: (topic, backward.target_topic(topic)),
                second: (topic, forward.target_topic(topic)),
            },
            home=first,
            group=group,
        ) as app:
            _wait(app, lambda: len(app.reads) >= 40, "the application at work on the first cluster")
            moves = [(app.now(), 0.0)]
            there = drkit(setup, "switchover", "--from", first, "--to", second, "--yes",
                          timeout_s=300)  # fmt: skip
            assert there.code == 0, there.err + there.out
            moves[0] = (moves[0][0], app.now())
            _wait(app, lambda: sum(r.cluster == second for r in app.reads) >= 30,
                  "the application at work on the second cluster")  # fmt: skip
            # Checked between the moves: a skip by the first translation would be read back
            # after the second (the group's old position on the first cluster) and hide.
            unread = app.wait_all_read(60)
            assert unread == [], ("lost or skipped by the move", unread[:5], app.summary())
            app.read_slowly()
            caught_up = app.now()
            _wait(app, lambda: sum(r.at > caught_up for r in app.reads) >= 20, "a backlog again")
            moves.append((app.now(), 0.0))
            back = drkit(setup, "switchover", "--from", second, "--to", first, "--yes",
                         timeout_s=300)  # fmt: skip
            assert back.code == 0, back.err + back.out
            returned = app.now()
            moves[1] = (moves[1][0], returned)
            _wait(app, lambda: sum(r.cluster == first and r.at > returned for r in app.reads)
                  >= 30, "the application back on the first cluster")  # fmt: skip
            app.stop_writing()
            unread = app.wait_all_read(60)
    assert app.violations == [], app.violations
    assert unread == [], (unread[:5], app.summary())
    # Nothing read again but what the reader took on the old cluster while a move ran: the
    # way back too (the group read the first cluster's topic through its replica there).
    assert app.rereads_outside(moves) == [], (app.rereads_outside(moves)[:5], app.summary())
    acknowledged = {w.cluster for w in app.acknowledged() if w.writer == "follower"}
    assert acknowledged == {first, second}, app.summary()
    # the stale writer was refused while the second cluster was the primary
    assert any(w.writer == "stale" and w.error for w in app.writes), app.summary()
    if exactly_once:
        for cluster, replica in ((second, forward.target_topic(topic)),
                                 (first, backward.target_topic(topic))):  # fmt: skip
            assert duplicates(clusters[cluster], replica, PARTITIONS) == {}, replica
    print(app.summary())


def _wait(app: AppHistory, predicate: Callable[[], bool], what: str) -> None:
    try:
        wait_until(predicate, 60, what=what)
    except AssertionError as err:
        raise AssertionError(f"{err}; {app.summary()}") from None
