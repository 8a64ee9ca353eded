"""A failback after an unplanned failover carries the groups back exactly (issue 48, item 4).

dc1 (a scratch cluster: killed) replicates ``orders`` to dc2; the flow falls behind (paused), so
dc1 takes a divergent tail dc2 never gets, then dies; ``drkit failover`` moves the groups to
dc2, where they read dc1's topic through its replica (``<dc1>.orders``) and dc2's own
``orders``; dc1 returns and ``drkit failback`` moves them back.  On dc1 every group must resume
``orders`` exactly where its reading stopped - wherever it read it: on dc1 before the failover,
through the replica on dc2, or both:

* nothing it had not read is skipped - the divergent tail included, which the failback leaves
  in ``orders`` (after exporting it) and replicates to dc2 afterwards;
* nothing it read is read again beyond the re-reads the plan reports for the move;

and on dc1's replica of dc2's ``orders`` exactly where it stood there.  The plan (JSON and text)
shows the carried-back moves (method ``returned``).

Ways the failback can go wrong here, each a partition of the case: a group that read part of
the replica (the way back inside the copies), one that read it to the end of what the forward
flow copied (the divergent tail still ahead), one that read on dc2 a copy the forward flow wrote
but never recorded in its offset map (a worker killed between the two), and one that had read
into the tail on dc1 before the failover.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from drkit.control import ControlRepository, DesiredState
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import commit_group_offsets, consume_ranges, produce_batch
from drkit.records import TopicPartition
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from drkit.store import StateStore
from drkit.topology.flow import FlowTopology
from tests.conftest import Names
from tests.failover_support import PARTITIONS, checkpointed, drkit, fill, progress_of, with_config
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import FlowSetup, Replicator, flow_setup, wait_until

COPIED = 200  # records per partition the forward flow copies before it falls behind
TAIL = 30  # records per partition dc1 takes afterwards: its divergent tail
ON_DC2 = 20  # records per partition applications write on dc2 while it is the primary

# Where each group stands on dc1 before the failover (it read everything below).
BEFORE = {
    "reader": {0: 40, 1: 120, 2: COPIED},
    "tail-reader": {0: COPIED, 1: COPIED, 2: COPIED},
}
# tail-reader reads into the divergent tail on dc1 before dc1 dies.
INTO_TAIL = {0: COPIED + 15, 1: COPIED + TAIL, 2: COPIED + 5}
# How far each group reads the replica of dc1's topic on dc2 (the offsets it commits there),
# None: what the failover gave it; and dc2's own topic.
ON_REPLICA: dict[str, dict[int, int | None]] = {
    "reader": {0: 150, 1: COPIED, 2: COPIED + 1},  # p2: the unrecorded copy of record 200
    "tail-reader": {0: None, 1: None, 2: None},
}
ON_OWN = {"reader": {0: 10, 1: ON_DC2, 2: 0}, "tail-reader": {0: ON_DC2, 1: ON_DC2, 2: ON_DC2}}
# Where each group must resume dc1's topic after the failback: the first record it has not read.
EXPECTED_BACK = {"reader": {0: 150, 1: COPIED, 2: COPIED + 1}, "tail-reader": INTO_TAIL}


def test_a_failback_after_an_unplanned_failover_resumes_every_group_where_it_stopped_reading(
    scratch: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("orders")
    groups = {label: names.group(label) for label in BEFORE}
    setup = flow_setup(tmp_path, scratch, dc2, [re.escape(topic)], reverse=True,
                       groups={"include": [re.escape(g) for g in groups.values()]})  # fmt: skip
    with_config(setup, flows=[{**f, "standby": f["source"] == setup.target}
                              for f in _flows(setup)])  # fmt: skip
    forward, backward = (FlowTopology.of(f) for f in setup.config.flows)
    replica, returned = forward.target_topic(topic), backward.target_topic(topic)
    dc1, dc2_end = setup.source_endpoint, setup.target_endpoint
    scratch.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    dc2.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    fill(dc1, topic, COPIED)
    read: dict[str, dict[int, list[str]]] = {g: {p: [] for p in range(PARTITIONS)} for g in groups}
    for label, group in groups.items():
        _read_and_commit(dc1, group, topic, {p: (0, at) for p, at in BEFORE[label].items()},
                         read[label])  # fmt: skip
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    control = ControlRepository(store)
    with Replicator(setup, log_dir=tmp_path):
        copied = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        wait_until(lambda: all(progress_of(setup).get(tp) == COPIED for tp in copied), 60,
                   what="dc1's topic copied")  # fmt: skip
        expected = {
            g: {TopicPartition(topic, p): o for p, o in BEFORE[label].items()}
            for label, g in groups.items()
        }
        wait_until(lambda: checkpointed(setup, expected), 60, what="both groups checkpointed")
        directive = control.set(forward.name, DesiredState.PAUSED, "test: replication behind")
        wait_until(lambda: any(a.epoch >= directive.epoch for a in control.acks(forward.name)),
                   30, what="the forward flow paused")  # fmt: skip
        # dc1 takes its divergent tail; tail-reader reads into it there; dc1 dies.
        fill(dc1, topic, TAIL, start=COPIED)
        _read_and_commit(dc1, groups["tail-reader"], topic,
                         {p: (COPIED, at) for p, at in INTO_TAIL.items()},
                         read["tail-reader"])  # fmt: skip
        assert scratch.local is not None
        scratch.local.kill_broker(scratch.name)
        failover = drkit(setup, "failover", "--from", setup.source, "--to", setup.target,
                         "--yes", "-o", "json")  # fmt: skip
        assert failover.code == 0, failover.err + failover.out
        # On dc2: applications write its own topic; a copy of dc1's record 200 of partition 2
        # reached the replica but not the offset map (a worker killed between the two).
        for p in range(PARTITIONS):
            produce_batch(dc2_end, topic, [(None, f"own-{p}-{i}".encode()) for i in range(ON_DC2)],
                          partition=p)  # fmt: skip
        copy = Provenance(setup.source, topic, 2, COPIED).encode()
        produce_batch(dc2_end, replica, [(None, f"2-{COPIED}".encode())], partition=2,
                      headers=((SOURCE_HEADER, copy),))  # fmt: skip
        for label, group in groups.items():
            at = dc2.admin().group_offsets(group).offsets
            reads = {
                TopicPartition(replica, p): (at[TopicPartition(replica, p)], until)
                for p, until in ON_REPLICA[label].items()
                if until is not None
            }
            reads |= {TopicPartition(topic, p): (0, until) for p, until in ON_OWN[label].items()}
            _read_ranges_and_commit(dc2_end, group, reads, read[label])
        scratch.local.start_broker(scratch.name)
        plan = drkit(setup, "failback", "--to", setup.source, "--plan", "-o", "json",
                     timeout_s=300)  # fmt: skip
        assert plan.code == 0, plan.err + plan.out
        text = drkit(setup, "failback", "--to", setup.source, "--plan", timeout_s=300)
        assert text.code == 0, text.err + text.out
        back = drkit(setup, "failback", "--to", setup.source, "--export-file",
                     str(tmp_path / "tail.jsonl"), "--yes", "-o", "json",
                     timeout_s=300)  # fmt: skip
    assert back.code == 0, back.err + back.out
    run = back.json()
    assert run["state"] == "succeeded", run
    # The plan shows every carried-back move: the replica's partition, where it resumes on
    # dc1's own topic, and no re-read.
    moves = {
        g["group"]: {(m["source_topic"], m["source_partition"]): m for m in g["partitions"]}
        for g in plan.json()["groups"]
    }
    planned = {
        label: {
            p: (m["target_topic"], m["target_partition"], m["method"], m["target_offset"],
                m["expected_rereads"])
            for p in range(PARTITIONS)
            if (m := moves[group].get((replica, p))) is not None
        }
        for label, group in groups.items()
    }  # fmt: skip
    assert planned == {
        label: {p: (topic, p, "returned", at, 0) for p, at in wanted.items()}
        for label, wanted in EXPECTED_BACK.items()
    }
    assert "returned" in text.out and replica in text.out, text.out
    dc1_admin = scratch.admin()
    committed = {g: dc1_admin.group_offsets(g).offsets for g in groups.values()}
    back_at = {
        label: {p: committed[g].get(TopicPartition(topic, p)) for p in range(PARTITIONS)}
        for label, g in groups.items()
    }
    assert back_at == EXPECTED_BACK
    ends = dc1_admin.topic_offsets(topic)
    for label, group in groups.items():
        # Read on from there: with everything read before, each record of dc1's topic once.
        after: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
        _collect(dc1, {TopicPartition(topic, p): (o, ends[p][1])
                       for p, o in back_at[label].items() if o is not None}, after)  # fmt: skip
        for p in range(PARTITIONS):
            seen = [v for v in read[label][p] if not v.startswith("own-")] + after[p]
            dc1_values = [f"{p}-{i}" for i in range(COPIED + TAIL)]
            assert sorted(seen, key=_order) == dc1_values, (group, p, _difference(seen, dc1_values))
        # dc2's own topic: on dc1's replica of it, exactly where the group stopped on dc2.
        on_returned = {p: committed[group].get(TopicPartition(returned, p))
                       for p in range(PARTITIONS)}  # fmt: skip
        assert on_returned == ON_OWN[label], (group, on_returned)


def _read_and_commit(
    endpoint: Any,
    group: str,
    topic: str,
    ranges: Mapping[int, tuple[int, int]],
    into: dict[int, list[str]],
) -> None:
    _read_ranges_and_commit(
        endpoint, group, {TopicPartition(topic, p): r for p, r in ranges.items()}, into
    )


def _read_ranges_and_commit(
    endpoint: Any,
    group: str,
    ranges: Mapping[TopicPartition, tuple[int, int]],
    into: dict[int, list[str]],
) -> None:
    """The group reads each ``[start, end)`` (values kept per partition), then commits the ends:
    an application that processed exactly those records."""
    _collect(endpoint, {tp: r for tp, r in ranges.items() if r[1] > r[0]}, into)
    commit_group_offsets(endpoint, group, {tp: end for tp, (_start, end) in ranges.items()})


def _collect(
    endpoint: Any, ranges: Mapping[TopicPartition, tuple[int, int]], into: dict[int, list[str]]
) -> None:
    for record in consume_ranges(endpoint, ranges, 60.0):
        into[record.partition].append((record.value or b"").decode())


def _order(value: str) -> tuple[int, int]:
    partition, offset = value.split("-")
    return int(partition), int(offset)


def _difference(seen: list[str], wanted: list[str]) -> dict[str, Any]:
    twice = sorted({v for v in seen if seen.count(v) > 1}, key=_order)
    return {"read twice": twice, "never read": sorted(set(wanted) - set(seen), key=_order)}


def _flows(setup: FlowSetup) -> list[dict[str, Any]]:
    document: dict[str, Any] = yaml.safe_load(setup.path.read_text())
    flows: list[dict[str, Any]] = document["flows"]
    return flows
