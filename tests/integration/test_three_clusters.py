"""Three clusters on real brokers (issue 48 item 1): one source replicated to two standbys by
one ``drkit replicate`` over the config ``drkit local up --clusters`` writes for three; one
standby made to lag (its worker stopped), the source killed under a producer's load;
``drkit failover --from SRC --plan`` without ``--to`` names the standby with the smaller RPO
and lists the other with its figures, and an automatic failover by ``drkit monitor`` picks the
same one - both would act, the choice decides - and the groups resume there exactly: every
record a group had not consumed is read, none skipped.  Then the far standby follows the near
one through the automatic failover run itself (its ``hold_standby_flows`` and
``follow_standbys`` steps, no separate command): its replica holds every record of the near
one's, each origin offset once, and ``drkit flows repoint`` run afterwards copies 0.  And the
history of the producer's acknowledgements is checked (issue 48's acceptance): every record
the source acknowledged below the fence point is on the promoted standby, and once on the far
one.  The fence point is what tests/invariants.py's check 3 takes
(the source's end per partition, below which every acknowledged record must reach the target);
a lost source records none (``record_fence_point`` runs on planned moves), so for this loss it
is the run's failover point: the near flow's replicated end the run translated at
(``Translation.failover_point``) - the records acknowledged from there on are the RPO, counted.

The source is a ``scratch`` cluster (killed); the standbys are the shared ``dc2`` ("near",
kept replicating until the kill) and ``dc1`` ("far", its worker stopped before the load).  The
far standby's alias sorts first: automation used to act on the first pair by name.

Both plans count 0 records lacking - each against the source end its own workers last saw,
and the far flow's saw none of the load - while the far flow's evidence is older by the time
the near one kept copying: the choice goes by the evidence's age (drkit.failover.standby_choice).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from drkit.automation.journal import AutomationJournal, is_automatic
from drkit.errors import KafkaError
from drkit.failover.model import RunState, StepName, StepState
from drkit.failover.results import Translation
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
from tests.invariants import Cluster, end_offsets, values
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import FlowSetup, Replicator, wait_until
from tests.three_clusters import copies_on, replica_of, store_url, three_clusters

BATCH = 5  # records per partition per batch of the load
PACE_S = 0.1  # between batches: an application's steady writes, a few hundred records in all


class Load(threading.Thread):
    """An application writing to every partition of the source until it stops answering;
    keeps what the source acknowledged, per partition: (offset, value) - each value once."""

    def __init__(self, setup: FlowSetup, topic: str) -> None:
        super().__init__(daemon=True, name="three-clusters-load")
        self.producer = AppProducer(setup.source_endpoint, topic, transactional=False, timeout_s=5)
        self.acked: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        self.error: KafkaError | None = None
        self.pace = threading.Event()  # never set: the pause between batches

    def run(self) -> None:
        batch = 0
        try:
            while True:
                for partition in range(PARTITIONS):
                    payloads = [
                        (None, f"load-{partition}-{batch}-{i}".encode()) for i in range(BATCH)
                    ]
                    acked = self.producer.send(payloads, partition=partition)
                    # Idempotent: a partition's records land in the order they were sent.
                    offsets = sorted(a.offset for a in acked)
                    sent = (value for _key, value in payloads)
                    self.acked[partition] += zip(offsets, sent, strict=True)
                batch += 1
                self.pace.wait(PACE_S)  # a rate, not a wait for some condition
        except KafkaError as err:  # the source is gone: the load ends
            self.error = err

    def total(self) -> int:
        return sum(len(writes) for writes in self.acked.values())

    def history(self) -> dict[int, list[tuple[int, bytes]]]:
        """Every write the source acknowledged, per partition: source_with_groups' fill
        (offsets from 0, values ``p-i``: tests.failover_support.fill) and the load's."""
        fill = {p: [(i, f"{p}-{i}".encode()) for i in range(PER_PARTITION)]
                for p in range(PARTITIONS)}  # fmt: skip
        return {p: fill[p] + self.acked[p] for p in range(PARTITIONS)}


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

    # The history: below the fence point every acknowledged record is on the promoted standby.
    point = {tp.partition: end for tp, end in Translation.of(run).failover_point().items()
             if tp.topic == topic}  # fmt: skip
    assert sorted(point) == list(range(PARTITIONS)), point
    history = load.history()
    near_cluster = Cluster(near.target, near.config.clusters[near.target].bootstrap_servers)
    below, past = _below(history, point)
    assert _held(near_cluster, replica, below, once=False) == ([], []), point
    assert min(point.values()) > PER_PARTITION, point  # the load reached the fence point
    lost, _ = _held(near_cluster, replica, past, once=False)
    print(f"history: {len(below)} acknowledged below the fence point {point}, all on "
          f"{near.target}; {len(past)} acknowledged past it, {len(lost)} of them lost (the "
          "RPO: copied past the flow's last progress, the others)")  # fmt: skip

    # The far standby follows the near one through the automatic failover run itself (its
    # hold_standby_flows and follow_standbys steps), not through a separate command.
    held = run.step(StepName.HOLD_STANDBY_FLOWS)
    assert held is not None and held.state is StepState.DONE, held
    assert set(held.detail["held"]) == {far.target} and held.detail["pending"] == {}, held.detail
    followed = run.step(StepName.FOLLOW_STANDBYS)
    assert followed is not None and followed.state is StepState.DONE, followed
    assert followed.detail["pending"] == {}, followed.detail
    print(f"the run's re-point: {followed.detail['followed'][far.target]}")
    # The command afterwards (a re-run): the flow still held, nothing left to copy.
    repointed = drkit(near, "flows", "repoint", "--from", near.source, "--to", near.target,
                      "--standby", far.target, "-o", "json")  # fmt: skip
    assert repointed.code == 0, repointed.out + repointed.err
    document = repointed.json()
    assert document["hold"]["held"] and document["hold"]["flow"] == far.config.flows[0].name
    rows = [r for r in document["partitions"] if r["origin"].startswith(f"{topic}-")]
    assert all(r["state"] == "follow" and r["copied"] == r["to_copy"] == 0 for r in rows), rows
    far_replica = replica_of(far, topic)
    on_near = copies_on(near, topic, replica)
    for p, copies in copies_on(far, topic, far_replica).items():
        origins = [o for o, _at in copies]
        assert origins == sorted({o for o, _at in on_near[p]}), p  # each once, in order
        assert len(origins) == len(set(origins)), p
    far_cluster = Cluster(far.target, far.config.clusters[far.target].bootstrap_servers)
    assert _held(far_cluster, far_replica, below, once=True) == ([], []), point


def _below(
    history: Mapping[int, list[tuple[int, bytes]]], point: Mapping[int, int]
) -> tuple[list[bytes], list[bytes]]:
    """The acknowledged values below the fence point, and those at or past it (the RPO)."""
    below = [v for p, writes in history.items() for offset, v in writes if offset < point[p]]
    past = [v for p, writes in history.items() for offset, v in writes if offset >= point[p]]
    return below, past


def _held(
    cluster: Cluster, replica: str, wanted: list[bytes], once: bool
) -> tuple[list[bytes], list[bytes]]:
    """Read with plain clients (tests/invariants.py): which of ``wanted`` the replica lacks,
    and (``once``) which it holds more than once."""
    held = Counter(values(cluster, replica, end_offsets(cluster, replica, PARTITIONS)))
    missing = [v for v in wanted if held[v] == 0]
    twice = [v for v in wanted if held[v] > 1] if once else []
    return missing, twice
