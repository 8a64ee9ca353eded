"""Groups that consumed the promoted cluster's replica of the lost one move on to the re-pointed
standby (issue 48 item 1, docs/three-dc.md "Groups after the move"), on real brokers.

The estate of tests/integration/test_repoint_run.py: a ``scratch`` source replicated to the
near standby (the shared ``dc2``) and the far one (``dc1``), the far one's worker stopped while
the near one copies 60 more records per partition, the source killed, ``drkit failover --from
SRC --to NEAR``.  Then the config gains the flow NEAR->FAR with ``follows: [SRC]`` (as the
re-point prints it) and ``drkit flows repoint`` copies what FAR lacks and writes the onward map.
A group consumed part of NEAR's replica - committed inside the range both replicas held before
the move on one partition, inside the copied range on another, at the start of the copy (X) on
the third - besides the groups the first failover moved there; ``drkit replicate`` runs NEAR->FAR
(whose workers copy nothing of the replica) and its checkpoint worker checkpoints that group on
NEAR's replica; then ``drkit failover --from NEAR --to FAR`` - NEAR answering (its groups'
offsets translated live), or NEAR lost too (a second scratch cluster, killed: the checkpoints
on FAR): every group resumes on FAR's
replica exactly after the last record it consumed on NEAR (compared by origin offset:
``drkit-src``) - nothing skipped, nothing read again."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from drkit.config.loader import load_config
from drkit.kafka import KafkaAdmin
from drkit.kafka.io import commit_group_offsets
from drkit.records import TopicPartition
from tests.conftest import Names
from tests.failover_support import PARTITIONS, PER_PARTITION, checkpointed, drkit, read_from
from tests.kafka_backends import ClusterUnderTest, scratch_cluster
from tests.replication_support import FlowSetup, Replicator, wait_until
from tests.three_clusters import copies_on, far_behind, replica_of

MORE = 60  # records per partition only the near standby copies
ALL = PER_PARTITION + MORE


def _onward_setup(near: FlowSetup, topic: str) -> FlowSetup:
    """The config with the flow NEAR->FAR the re-point prints added (``follows``: the lost
    source), that flow first (for the helpers)."""
    document = yaml.safe_load(near.path.read_text())
    src, near_alias = near.source, near.target
    far_alias = next(f["target"] for f in document["flows"] if f["target"] != near_alias)
    document["flows"].append(
        {"source": near_alias, "target": far_alias, "topics": {"include": [topic]},
         "follows": [src]}
    )  # fmt: skip
    path = near.path.with_name(f"onward-{near.path.name}")
    path.write_text(yaml.safe_dump(document))
    config = load_config(path)
    onward = config.flow(f"{near_alias}->{far_alias}")
    others = tuple(f for f in config.flows if f is not onward)
    return FlowSetup(path, config.model_copy(update={"flows": (onward, *others)}),
                     near_alias, far_alias)  # fmt: skip


@pytest.mark.parametrize("near_lost", [False, True], ids=["near-answering", "near-lost"])
def test_groups_on_the_promoted_replica_fail_over_to_the_re_pointed_standby_exactly(
    scratch: ClusterUnderTest,
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
    near_lost: bool,
) -> None:
    with ExitStack() as stack:
        # Lost too: a second scratch cluster (the shared dc2 is never killed); its groups then
        # move by the checkpoints NEAR->FAR's checkpoint worker wrote on FAR.
        near_cluster = stack.enter_context(scratch_cluster()) if near_lost else dc2
        _groups_move_on(scratch, near_cluster, dc1, names, tmp_path, near_lost)


def _groups_move_on(
    scratch: ClusterUnderTest,
    near_cluster: ClusterUnderTest,
    far_cluster: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
    near_lost: bool,
) -> None:
    started = time.monotonic()
    topic = names.topic("orders")
    # The failover leaves the far standby to the command (this test is the command's onward map).
    near, far = far_behind(
        tmp_path, scratch, near_cluster, far_cluster, topic, names, MORE, repoint_in_run=False
    )
    failed_over = drkit(near, "failover", "--from", near.source, "--to", near.target, "--yes")
    assert failed_over.code == 0, failed_over.out + failed_over.err
    onward = _onward_setup(near, topic)
    replica = replica_of(near, topic)  # the same name on both standbys
    assert replica == replica_of(far, topic)

    run = drkit(onward, "flows", "repoint", "--from", near.source, "--to", near.target,
                "--standby", far.target, "-o", "json")  # fmt: skip
    assert run.code == 0, run.out + run.err
    document = run.json()
    assert document["onward"]["configured"] and document["onward"]["map_not_written"] is None
    rows = [r for r in document["partitions"] if r["origin"].startswith(f"{topic}-")]
    assert [r["copied"] for r in rows] == [MORE] * PARTITIONS, rows
    # Every origin offset of the replica mapped: the shared range and the copied one.
    assert all(r["onward_mapped"] == ALL for r in rows), rows
    again = drkit(onward, "flows", "repoint", "--from", near.source, "--to", near.target,
                  "--standby", far.target, "-o", "json")  # fmt: skip
    assert again.code == 0, again.out + again.err
    assert [r["onward_mapped"] for r in again.json()["partitions"]
            if r["origin"].startswith(f"{topic}-")] == [0] * PARTITIONS  # fmt: skip

    # A group that consumed part of NEAR's replica after the promotion: through origin 250
    # (shared), 430 (copied) and 399 (the last shared one: next is X, the first copied).
    on_near = copies_on(near, topic, replica)
    through = {0: 250, 1: 430, 2: PER_PARTITION - 1}
    position = {p: dict(on_near[p])[o] + 1 for p, o in through.items()}
    reader = names.group("after-promotion")
    consumed = {TopicPartition(replica, p): at for p, at in position.items()}
    commit_group_offsets(near.target_endpoint, reader, consumed)
    # Every group committed on NEAR's replica, and where it stands by origin offset: the origin
    # offset of the record at its position (the next it reads; None at the end).
    groups: dict[str, dict[int, int | None]] = {}
    committed: dict[str, dict[TopicPartition, int]] = {}
    near_admin = KafkaAdmin(near.target_endpoint)
    for group in (reader, *(names.group(x) for x in ("start", "middle", "end", "lagging"))):
        committed[group] = dict(near_admin.group_offsets(group).offsets)
        nexts: dict[int, int | None] = {}
        for p in range(PARTITIONS):
            at = committed[group][TopicPartition(replica, p)]
            nexts[p] = next((o for o, pos in on_near[p] if pos >= at), None)
        groups[group] = nexts
    assert groups[reader] == {0: 251, 1: 431, 2: PER_PARTITION}

    with Replicator(onward, "--flow", onward.config.flows[0].name, log_dir=tmp_path):
        # The checkpoint worker of NEAR->FAR checkpoints every group on NEAR's replica.
        wait_until(lambda: checkpointed(onward, committed), 60, what="the groups checkpointed")
        if not near_lost:
            moved = drkit(onward, "failover", "--from", near.target, "--to", far.target,
                          "--yes")  # fmt: skip
            assert moved.code == 0, moved.out + moved.err
    if near_lost:
        assert near_cluster.local is not None
        near_cluster.local.kill_broker(near_cluster.name)
        moved = drkit(onward, "failover", "--from", near.target, "--to", far.target, "--yes")
        assert moved.code == 0, moved.out + moved.err
    # The workers of NEAR->FAR never copied the replica (no NEAR.SRC.orders on FAR).
    assert f"{near.target}.{replica}" not in KafkaAdmin(far.target_endpoint).list_topics()

    far_admin = KafkaAdmin(far.target_endpoint)
    for group, nexts in groups.items():
        resumed = far_admin.group_offsets(group).offsets
        on_far = {p: resumed[TopicPartition(replica, p)] for p in range(PARTITIONS)}
        read = read_from(far.target_endpoint,
                         {TopicPartition(replica, p): at for p, at in on_far.items()})  # fmt: skip
        for p, first in nexts.items():
            # From the record after the last one it consumed, each later one once, in order.
            expect = list(range(first, ALL)) if first is not None else []
            assert read[TopicPartition(replica, p)] == expect, (group, p, on_far[p])
    print(f"onward failover: {len(groups)} groups moved exactly in "
          f"{time.monotonic() - started:.1f}s")  # fmt: skip
