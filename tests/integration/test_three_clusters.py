"""Three clusters on real brokers (issue 48 item 1): one source replicated to two standbys by
one ``drkit replicate`` over the config ``drkit local up --clusters`` writes for three; one
standby made to lag (its worker stopped), the source killed under a producer's load;
``drkit failover --from SRC --plan`` without ``--to`` names the standby with the smaller RPO
and lists the other with its figures, and an automatic failover by ``drkit monitor`` picks the
same one - both would act, the choice decides - and the groups resume there exactly: every
record a group had not consumed is read, none skipped.

The source is a ``scratch`` cluster (killed); the standbys are the shared ``dc2`` ("near",
kept replicating until the kill) and ``dc1`` ("far", its worker stopped before the load).  The
far standby's alias sorts first: automation used to act on the first pair by name.

Both plans count 0 records lacking - each against the source end its own workers last saw,
and the far flow's saw none of the load - while the far flow's evidence is older by the time
the near one kept copying: the choice goes by the evidence's age (drkit.failover.standby_choice).
"""

from __future__ import annotations

import threading
from pathlib import Path

from drkit.automation.journal import AutomationJournal, is_automatic
from drkit.errors import KafkaError
from drkit.failover.model import RunState
from drkit.failover.runs import RunRecord, RunRepository
from drkit.kafka import KafkaAdmin
from drkit.kafka.apps import AppProducer
from drkit.records import TopicPartition
from drkit.store import StateStore
from tests.conftest import Names
from tests.failover_support import (
    PARTITIONS,
    PER_PARTITION,
    drkit,
    progress_of,
    read_from,
    resumes_at,
    source_with_groups,
    wait_replicated,
)
from tests.integration.test_monitor import MonitorProcess, cluster_state
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import FlowSetup, Replicator, wait_until
from tests.three_clusters import replica_of, store_url, three_clusters

BATCH = 5  # records per partition per batch of the load
PACE_S = 0.1  # between batches: an application's steady writes, a few hundred records in all


class Load(threading.Thread):
    """An application writing to every partition of the source until it stops answering;
    keeps what the source acknowledged, per partition."""

    def __init__(self, setup: FlowSetup, topic: str) -> None:
        super().__init__(daemon=True, name="three-clusters-load")
        self.producer = AppProducer(setup.source_endpoint, topic, transactional=False, timeout_s=5)
        self.acked: dict[int, int] = dict.fromkeys(range(PARTITIONS), 0)
        self.error: KafkaError | None = None
        self.pace = threading.Event()  # never set: the pause between batches

    def run(self) -> None:
        batch = 0
        try:
            while True:
                for partition in range(PARTITIONS):
                    payloads = [(None, f"load-{batch}-{i}".encode()) for i in range(BATCH)]
                    acked = self.producer.send(payloads, partition=partition)
                    self.acked[partition] += len(acked)
                batch += 1
                self.pace.wait(PACE_S)  # a rate, not a wait for some condition
        except KafkaError as err:  # the source is gone: the load ends
            self.error = err

    def total(self) -> int:
        return sum(self.acked.values())


def _automatic_runs(tmp_path: Path) -> list[RunRecord]:
    store = StateStore(store_url(tmp_path))
    return [r for r in RunRepository(store).latest() if is_automatic(r.requested_by)]


def _copied(setup: FlowSetup, topic: str) -> dict[int, int]:
    """The flow's progress on ``topic``, per partition (0 where it has none yet)."""
    progress = progress_of(setup)
    return {p: progress.get(TopicPartition(topic, p), 0) for p in range(PARTITIONS)}


def test_the_standby_with_the_smaller_rpo_is_chosen_by_the_cli_and_by_automation(
    scratch: ClusterUnderTest,
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
) -> None:
    topic = names.topic("orders")
    near, far = three_clusters(tmp_path, scratch, dc2, dc1)
    groups = source_with_groups(near, topic, names)
    # One drkit replicate runs both flows, with their checkpoint workers.
    with Replicator(near, log_dir=tmp_path):
        wait_replicated(near, topic, groups)
        wait_replicated(far, topic, groups)
    with MonitorProcess(near.path, "east", tmp_path) as monitor:
        paused = drkit(near, "automation", "pause", "--reason", "the CLI's plan first")
        assert paused.code == 0, paused.err
        # Only the near flow replicates from here: the far standby lags by the whole load.
        with Replicator(near, "--flow", near.config.flows[0].name, log_dir=tmp_path):
            load = Load(near, topic)
            load.start()
            wait_until(
                lambda: min(_copied(near, topic).values()) > PER_PARTITION + 2 * BATCH,
                60,
                what=lambda: f"the near flow copying the load (progress {_copied(near, topic)})",
            )
            assert scratch.local is not None
            scratch.local.kill_broker(scratch.name)  # under the load
            load.join(60)
            assert load.error is not None and load.total() > 0, "the load never ran"
        wait_until(
            lambda: (
                cluster_state(monitor, near.source) == "UNAVAILABLE"
                and cluster_state(monitor, near.target) == "HEALTHY"
                and cluster_state(monitor, far.target) == "HEALTHY"
            ),
            60,
            what=lambda: f"the monitor seeing the source gone: {monitor.status()}",
        )
        assert _copied(far, topic) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)

        # (a) the CLI without --to: the near standby, the far one listed with its figures.
        planned = drkit(near, "failover", "--from", near.source, "--plan", "--output", "json")
        assert planned.code in (0, 4), planned.err
        plan = planned.json()
        choice = plan["standby_choice"]
        assert plan["target"] == near.target and choice["chosen"] == near.target, choice
        by_cluster = {c["cluster"]: c for c in choice["candidates"]}
        lost = by_cluster[far.target]
        assert lost["outcome"] == "lost" and lost["healthy"], lost
        assert lost["rpo_s"] > by_cluster[near.target]["rpo_s"], choice
        assert "older evidence" in lost["why"], lost
        text = drkit(near, "failover", "--from", near.source, "--plan")
        assert f"standby {near.target} chosen" in text.out, text.out + text.err
        assert f"{far.target}: lost" in text.out, text.out

        # (b) automation, resumed, chooses the same standby.
        resumed = drkit(near, "automation", "resume", "--reason", "now let it act")
        assert resumed.code == 0, resumed.err
        runs = wait_until(
            lambda: [r for r in _automatic_runs(tmp_path) if r.state is not RunState.RUNNING],
            90,
            0.5,
            what="an automatic failover that ended",
        )
    [run] = runs
    assert run.state is RunState.SUCCEEDED, run.result
    assert run.target == near.target, f"automation failed over to {run.target}"
    decisions = AutomationJournal(StateStore(store_url(tmp_path))).decisions(200)
    passed_over = [
        d
        for d in decisions
        if d.target == far.target
        and any(c["name"] == "standby" and not c["passed"] for c in d.evidence["checks"])
    ]
    assert passed_over, [d.summary for d in decisions]
    assert near.target in passed_over[0].summary
    # The groups resume on the near standby exactly where they stood on the source.
    replica = replica_of(near, topic)
    target = near.target_endpoint
    copied = read_from(target, {TopicPartition(replica, p): 0 for p in range(PARTITIONS)})
    for tp, offsets in copied.items():  # the replica: the source's offsets, none skipped
        assert offsets == list(range(len(offsets))), tp
        assert len(offsets) > PER_PARTITION, (tp, len(offsets))  # and some of the load
    admin = KafkaAdmin(target)
    for group, positions in groups.items():
        committed = admin.group_offsets(group).offsets
        assert set(committed) == {TopicPartition(replica, tp.partition) for tp in positions}
        first = resumes_at(target, committed)
        read = read_from(target, committed)
        for tp, position in positions.items():
            at = TopicPartition(replica, tp.partition)
            end = len(copied[at])
            assert first[at] == (position if position < end else None), (group, at)
            assert read[at] == list(range(position, end)), (group, at)
