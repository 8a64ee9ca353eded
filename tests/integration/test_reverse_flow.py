"""The reverse flow of an active/passive pair runs after every switchover, whenever it happens.

The race of issue 52: a reverse flow (standby) whose source had no selected topic yet - its
``heartbeats`` topic, created by the worker itself a moment before, not yet in the source's
metadata - subscribed with an empty list; librdkafka refused it for good, the flow ended at
start without a word until SIGTERM, and a switchover then "started" it: the new primary had no
standby while every status said the move had succeeded.

Here the new primary is a fresh cluster whose ``heartbeats`` topic is deleted before each
round, so every round starts the reverse flow on a source with nothing selected; the switchover
follows ``drkit replicate``'s start at a different moment each round.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import consume_all, produce_batch
from drkit.topology.flow import FlowTopology
from drkit.topology.internal_topics import HEARTBEATS
from tests.conftest import Names
from tests.failover_support import PARTITIONS, drkit, fill, with_config
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import FlowSetup, Replicator, flow_setup, wait_until

# Seconds between `drkit replicate` starting and the switchover, one round each.  CI runs these
# four; DRKIT_TEST_REVERSE_ROUNDS=N repeats the list up to N rounds (issue 52's acceptance: 10).
MOMENTS = (0.0, 1.0, 3.0, 7.0)
REACHES_WITHIN_S = 30.0
SILENCE_S = 10.0


def _rounds() -> list[float]:
    wanted = int(os.environ.get("DRKIT_TEST_REVERSE_ROUNDS", len(MOMENTS)))
    return [MOMENTS[i % len(MOMENTS)] for i in range(wanted)]


def _values(endpoint: ClusterEndpoint, topic: str) -> list[bytes]:
    """The values of ``topic`` on ``endpoint`` ([] while the topic does not exist)."""
    if topic not in KafkaAdmin(endpoint).list_topics():
        return []
    return [r.value or b"" for r in consume_all(endpoint, topic, timeout_s=10)]


def _without_heartbeats(admin: KafkaAdmin) -> None:
    """The new primary as a fresh cluster has it: no ``heartbeats`` (nothing selected)."""
    if HEARTBEATS in admin.list_topics():
        admin.delete_topics([HEARTBEATS])
    wait_until(lambda: HEARTBEATS not in admin.list_topics(), 30, what="heartbeats deleted")


@pytest.mark.timeout(120 + 60 * (1 + len(_rounds())))  # ~35 s a round on two loaded cores
def test_the_reverse_flow_runs_after_a_switchover_at_any_moment_after_replicate_starts(
    dc1: ClusterUnderTest, scratch: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("orders")
    setup = flow_setup(tmp_path, dc1, scratch, [f"{names.prefix}.*"], reverse=True)
    document_flows = [
        {"source": f.source, "target": f.target, "topics": {"include": [f"{names.prefix}.*"]},
         "standby": f.source == setup.target, "topic_refresh_interval_s": 1.0}
        for f in setup.config.flows
    ]  # fmt: skip
    # Each round's replicator is a new worker, and the last one's acks are in the store: the
    # engine confirms the reverse flow only once that silent worker is presumed stopped - its
    # silence window after its last ack (30 s by default: ~20 s of each round's switchover
    # waited for the replicator stopped a moment before).  10 s, as the drills have it.
    with_config(setup, flows=document_flows, failover={"worker_silence_s": SILENCE_S})
    dc1.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    fill(setup.source_endpoint, topic, 100)
    # First the deterministic form of the race: the reverse flow's only topic goes away under
    # its running worker (the topic watcher then hands it an empty set); then the natural one.
    rounds: list[float | None] = [None, *_rounds()]
    for index, moment in enumerate(rounds):
        reached_s = _round(setup, names, tmp_path, index, moment)
        when = "heartbeats deleted under it" if moment is None else f"+{moment}s"
        print(f"round {index}: switchover {when}, the new topic copied back in {reached_s:.1f}s")


def _round(
    setup: FlowSetup, names: Names, tmp_path: Path, index: int, moment: float | None
) -> float:
    """One switchover there and back; ``moment``: seconds after `drkit replicate` started (None:
    once the reverse flow's worker ran and its only topic was deleted under it).  Returns how
    long the new primary's new topic took to reach the old primary."""
    new_primary = KafkaAdmin(setup.target_endpoint)
    back_flow = FlowTopology.of(setup.config.flows[1])
    _without_heartbeats(new_primary)
    fresh = names.topic(f"new-{index}")
    label = f"round {index} ({'deleted under it' if moment is None else f'+{moment}s'})"
    with Replicator(setup, log_dir=tmp_path) as replicator:
        if moment is None:
            reverse = back_flow.name
            assigned = f"partitions assigned  flow={reverse} "
            wait_until(
                lambda: assigned in replicator.log() or _tail(replicator.log()),
                60,
                what=f"{label}: {reverse} holding heartbeats (else the log's tail)",
            )
            _without_heartbeats(new_primary)
            wait_until(
                lambda: re.search(r"is selected (yet|any more)", replicator.log(assigned)),
                30,
                what=f"{label}: the reverse flow noticing it has nothing to read",
            )
        else:
            time.sleep(moment)  # the moment under test, not a wait for a condition
        there = drkit(setup, "switchover", "--from", setup.source, "--to", setup.target,
                      "--yes", "-o", "json", timeout_s=300)  # fmt: skip
        assert there.code == 0, f"{label}: {there.err}{there.out}"
        run = there.json()
        step = next(s for s in run["steps"] if s["name"] == "start_reverse_flow")
        assert step["detail"]["confirmed"] is True, (label, step["detail"], replicator.log())
        assert not run["result"].get("warnings"), run["result"]
        # Applications write a topic that did not exist before, on the new primary ...
        new_primary.create_topics([TopicSpec(fresh, 1)])
        produce_batch(setup.target_endpoint, fresh, [(None, f"r{index}".encode())], 0)
        # ... and it reaches the old primary.
        replica = back_flow.target_topic(fresh)
        started = time.monotonic()
        wait_until(
            lambda: _values(setup.source_endpoint, replica) or _tail(replicator.log()),
            REACHES_WITHIN_S,
            what=f"{label}: {fresh} copied to {setup.source} as {replica} (the values read, "
            "else the replicator's last log lines)",
        )
        reached_s = time.monotonic() - started
        back = drkit(setup, "switchover", "--from", setup.target, "--to", setup.source,
                     "--yes", "-o", "json", timeout_s=300)  # fmt: skip
        assert back.code == 0, f"{label} back: {back.err}{back.out}"
        assert back.json()["state"] == "succeeded"
    log = replicator.log()
    assert "flow ended for good" not in log and "Traceback" not in log, log[-5000:]
    return reached_s


class _Tail(str):
    """A log tail that is not a success: wait_until shows it when the wait times out."""

    def __bool__(self) -> bool:
        return False


def _tail(log: str) -> _Tail:
    return _Tail(log[-3000:])
