"""``drkit flows repoint`` (the run) on real brokers (issue 48 item 1, docs/three-dc.md): one
source replicated to two standbys (in transactions, or not); the far one's worker stopped while
the near one copies more (and a range of it twice, as a restart does); the source killed;
``drkit failover --from SRC --to NEAR`` promotes the near standby; the run copies what the far
standby lacks from the near one's replica - a first run killed between a batch's copies and
their offset syncs, a second one completing it.  The far replica then holds every source
record, each origin offset once, in origin order; the far flow's offset map (verified with its
key) places every copy, so a checkpoint stated in source offsets past what the far flow copied
itself translates exactly onto the follow-on's copy; the run tells the operator the onward flow
to add; and a third run copies nothing.  A partition that cannot be told (an unsigned offset
sync on the far standby) stops the run before it writes anything.  And the run holds the flow it
replaces: with a ``drkit replicate`` running the far flow live (its source dead), the run sets
it STOPPED and copies only once that worker acknowledged; the source then returns with a tail
of records the near standby never had, and the far replica still holds each origin offset once
and nothing of that tail - the returned source fed nothing in.

The source is a ``scratch`` cluster (killed); the standbys the shared ``dc2`` (near) and ``dc1``
(far), as in tests/integration/test_three_clusters.py."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import yaml

from drkit.control import ControlRepository, DesiredState
from drkit.kafka import KafkaAdmin
from drkit.kafka.io import consume_ranges, produce_batch
from drkit.offsets.mapping_loader import MappingLoader
from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun, OffsetSync
from drkit.signing import Kind, Signer
from drkit.store import StateStore
from drkit.store.flow_keys import keys_of
from drkit.topology.flow import FlowTopology
from drkit.translation import Method, TargetBounds, Translated, translate
from tests.conftest import Names
from tests.failover_support import (
    PARTITIONS,
    PER_PARTITION,
    drkit,
    fill,
    progress_of,
    source_with_groups,
    wait_replicated,
)
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import FlowSetup, Replicator, wait_until
from tests.three_clusters import copies_on, far_behind, replica_of, store_url, three_clusters

MORE = 60  # records per partition only the near standby copies
ALL = PER_PARTITION + MORE


@pytest.mark.parametrize("exactly_once", [True, False], ids=["transactions", "plain"])
def test_the_far_standby_follows_the_promoted_one_with_every_record_once(
    scratch: ClusterUnderTest,
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
    exactly_once: bool,
) -> None:
    topic = names.topic("orders")
    # The failover leaves the far standby to the command (as when the run could not re-point
    # it): this test is the command's; the run's own re-point is test_three_clusters.py's.
    near, far = far_behind(
        tmp_path, scratch, dc2, dc1, topic, names, MORE, exactly_once, repoint_in_run=False
    )
    repoint = ("flows", "repoint", "--from", near.source, "--to", near.target,
               "--standby", far.target)  # fmt: skip

    # The near replica also holds a restart's re-copy past where the far one follows from:
    # written twice there, to be copied once.
    _recopy(near, topic, PER_PARTITION + 20, PER_PARTITION + 40)

    # Named with --to: without a monitor's health reports the choice would promote neither.
    failed_over = drkit(near, "failover", "--from", near.source, "--to", near.target, "--yes",
                        "-o", "json")  # fmt: skip
    assert failed_over.code == 0, failed_over.out + failed_over.err
    assert failed_over.json()["plan"]["target"] == near.target, failed_over.out

    # Killed between the first batch's copies and their offset syncs: in a transaction left
    # open (aborted by the next run's producer), or written and never synced (the next run
    # reads them by provenance and places them).
    killed = drkit(near, *repoint, env={"DRKIT_FAILPOINTS": "follow_on.before_syncs=kill"})
    assert killed.code == -signal.SIGKILL, killed.out + killed.err

    started = time.monotonic()
    run = drkit(near, *repoint, "--output", "json")
    took_s = time.monotonic() - started
    assert run.code == 0, run.out + run.err
    document = run.json()
    assert document["plan"] is False, document
    rows = {r["origin"]: r for r in document["partitions"] if r["origin"].startswith(f"{topic}-")}
    assert sorted(rows) == [f"{topic}-{p}" for p in range(PARTITIONS)], document
    for row in rows.values():
        assert row["state"] == "follow", row
        assert row["copied"] == row["to_copy"] and row["copied"] + row["placed"] == MORE, row
    # The killed batch was the first partition's with records to copy (``heartbeats`` sorts
    # first): aborted with its transaction, or placed now.
    placed = sum(r.get("placed", 0) for r in document["partitions"])
    assert (placed > 0) is not exactly_once, document
    onward = document["onward"]
    assert onward["flow"] == f"{near.target}->{far.target}" and not onward["configured"]
    [added] = yaml.safe_load(onward["yaml"])["flows"]
    assert (added["source"], added["target"]) == (near.target, far.target), added
    copied = sum(r["copied"] for r in rows.values())
    print(f"follow-on: {copied} records copied in {took_s:.1f}s (the whole command)")

    replica = replica_of(far, topic)
    positions = copies_on(far, topic, replica)
    for p, held in positions.items():
        # Every record of the source, each origin offset once, in origin order.
        assert [origin for origin, _at in held] == list(range(ALL)), p
    _assert_map_places_every_copy(tmp_path, far, topic, replica, positions)

    again = drkit(near, *repoint)
    assert again.code == 0, again.out + again.err
    assert f"{far.target} following {near.target} after {near.source}: 0 copied" in again.out
    assert "earlier copies" not in again.out, again.out
    assert [o for o, _at in copies_on(far, topic, replica)[0]] == list(range(ALL))


def test_a_partition_that_cannot_be_told_stops_the_run_before_anything_is_copied(
    scratch: ClusterUnderTest,
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
) -> None:
    topic = names.topic("orders")
    near, far = far_behind(tmp_path, scratch, dc2, dc1, topic, names, MORE)
    # An unsigned offset sync on the far standby claiming origin offsets no verified run covers:
    # copies the map cannot place may exist there, so that partition's frontier is unknown.
    replica = replica_of(far, topic)
    syncs = FlowTopology.of(far.config.flows[0]).offset_syncs_topic
    forged = OffsetSync(
        TopicPartition(topic, 1), TopicPartition(replica, 1), OffsetRun(2_000, 2_000, 5)
    )
    produce_batch(far.target_endpoint, syncs, [(forged.key(), forged.value())], partition=0)
    watched = [TopicPartition(replica, p) for p in range(PARTITIONS)]
    watched.append(TopicPartition(syncs, 0))
    before = KafkaAdmin(far.target_endpoint).list_offsets(watched, "latest")

    # The failover's own follow_standbys step: the far standby pending, the run not failed.
    failed_over = drkit(near, "failover", "--from", near.source, "--to", near.target, "--yes")
    assert failed_over.code == 0, failed_over.out + failed_over.err
    command = f"drkit flows repoint --from {near.source} --to {near.target} --standby {far.target}"
    assert "WARNING follow_standbys" in failed_over.out and command in failed_over.out, (
        failed_over.out
    )
    assert "cannot tell" in failed_over.out, failed_over.out
    assert KafkaAdmin(far.target_endpoint).list_offsets(watched, "latest") == before

    refused = drkit(near, "flows", "repoint", "--from", near.source, "--to", near.target,
                    "--standby", far.target)  # fmt: skip
    assert refused.code == 3, refused.out + refused.err
    assert "refused, nothing copied" in refused.out, refused.out
    assert f"{topic}-1 " in refused.out and "cannot tell" in refused.out, refused.out
    assert "flows:" not in refused.out  # no onward flow: nothing was re-pointed
    assert KafkaAdmin(far.target_endpoint).list_offsets(watched, "latest") == before


TAIL = 25  # records per partition the source takes after the near standby's last copy


def test_the_run_holds_the_replaced_flow_so_a_returning_source_feeds_nothing_in(
    scratch: ClusterUnderTest,
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
) -> None:
    topic = names.topic("orders")
    near, far = three_clusters(tmp_path, scratch, dc2, dc1, repoint_in_run=False)  # the command's
    far_name = far.config.flows[0].name
    control = ControlRepository(StateStore(store_url(tmp_path)))
    source_with_groups(near, topic, names)
    # One `drkit replicate` for both flows, kept running to the end: the far flow's worker
    # stays live through the source's loss, as a deployment's does.
    with Replicator(near, log_dir=tmp_path) as replicator:
        wait_replicated(near, topic)
        wait_replicated(far, topic)
        paused = drkit(near, "flows", "pause", far_name, "-m", "far behind")
        assert paused.code == 0, paused.out + paused.err
        fill(near.source_endpoint, topic, MORE, start=PER_PARTITION)
        wait_until(
            lambda: all(
                progress_of(near).get(TopicPartition(topic, p)) == ALL for p in range(PARTITIONS)
            ),
            60,
            what="the near standby copying the rest",
        )
        assert scratch.local is not None
        scratch.local.kill_broker(scratch.name)
        # Running again before the failover (allowed: the source is still the active
        # cluster), its worker live and acknowledging with nothing to read.
        resumed = drkit(near, "flows", "resume", far_name, "-m", "far runs", "-o", "json")
        assert resumed.code == 0, resumed.out + resumed.err
        worker = resumed.json()["workers"]["acknowledged"]
        assert len(worker) == 1, resumed.out
        failed_over = drkit(near, "failover", "--from", near.source, "--to", near.target,
                            "--yes")  # fmt: skip
        assert failed_over.code == 0, failed_over.out + failed_over.err
        assert control.directive(far_name).desired is DesiredState.RUNNING  # left as it was

        run = drkit(near, "flows", "repoint", "--from", near.source, "--to", near.target,
                    "--standby", far.target, "-o", "json")  # fmt: skip
        assert run.code == 0, run.out + run.err
        document = run.json()
        hold = document["hold"]
        assert hold["flow"] == far_name and hold["held"], hold
        assert hold["acknowledged"] == worker and hold["written"], hold
        assert hold["undo"].startswith(f"drkit flows start {far_name} "), hold
        rows = [r for r in document["partitions"] if r["origin"].startswith(f"{topic}-")]
        assert [r["copied"] for r in rows] == [MORE] * PARTITIONS, rows
        directive = control.directive(far_name)
        assert directive.desired is DesiredState.STOPPED and directive.epoch == hold["epoch"]

        # The source returns - with records the promoted standby never had - while the far
        # flow's worker still runs.
        scratch.local.start_broker(scratch.name)
        fill(near.source_endpoint, topic, TAIL, start=ALL)
        # Long enough for a running worker to resume from its committed progress (at
        # PER_PARTITION) and copy: with the hold taken out, 60 duplicates and the 25-record tail
        # per partition were on the far replica 6-9 s after the source was back.
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline:
            assert replicator.process is not None and replicator.process.poll() is None
            held = copies_on(far, topic, replica_of(far, topic))
            for p, copies in held.items():
                assert [o for o, _at in copies] == list(range(ALL)), (p, copies[-5:])
            time.sleep(2.0)
        [ack] = control.acks(far_name)
        assert (ack.state, ack.epoch) == (DesiredState.STOPPED, hold["epoch"]), ack
        assert ack.age_s < 5.0, ack  # live all along: held by the directive, not dead


def _recopy(near: FlowSetup, topic: str, first: int, end: int) -> None:
    """Append to every partition of the near replica a second copy of the records of origin
    offsets ``[first, end)`` (same key, value and headers), with no offset sync: what a
    dc1->dc2 worker that restarted from an older commit and died before syncing leaves."""
    replica = replica_of(near, topic)
    for p, held in copies_on(near, topic, replica).items():
        at = dict(held)
        tp = TopicPartition(replica, p)
        records = consume_ranges(near.target_endpoint, {tp: (at[first], at[end - 1] + 1)})
        payloads = [(r.key, r.value, r.headers) for r in records]
        assert len(payloads) == end - first
        produce_batch(near.target_endpoint, replica, payloads, partition=p)


def _assert_map_places_every_copy(
    tmp_path: Path,
    far: FlowSetup,
    topic: str,
    replica: str,
    positions: dict[int, list[tuple[int, int]]],
) -> None:
    """The far flow's offset map, verified with its key, places each origin offset at its
    copy; a group checkpointed (in source offsets) inside what the follow-on copied
    translates exactly onto that copy."""
    flow = far.config.flows[0]
    key = keys_of(far.config, StateStore(store_url(tmp_path)))(flow.name)
    loader = MappingLoader(
        flow, far.target_endpoint, signer=Signer(key, Kind.OFFSET_SYNC, flow.name)
    )
    try:
        mappings = loader.refresh()
        assert loader.rejected == 0
    finally:
        loader.close()
    bounds = KafkaAdmin(far.target_endpoint).list_offsets(
        [TopicPartition(replica, p) for p in range(PARTITIONS)], "latest"
    )
    for p, held in positions.items():
        mapping = mappings[TopicPartition(topic, p)]
        placed = {
            run.src_start + i: run.dst_start + i for run in mapping.runs for i in range(run.length)
        }
        assert placed == dict(held), p
        committed = PER_PARTITION + MORE // 2
        end = bounds[TopicPartition(replica, p)]
        moved = translate(committed, mapping, TargetBounds(0, end))
        assert isinstance(moved, Translated) and moved.method is Method.EXACT, moved
        assert moved.target_offset == dict(held)[committed], moved
