"""A failover against a state store that lost the flow keys (issue 46): the store replaced, or
restored from a backup without its ``flow_keys`` table, after the workers signed their offset
syncs with the old store's key (drkit/signing.py).

Without a configured ``signing.secret`` no sync verifies any more.  A planned switchover is
blocked and names the key; an unplanned failover goes on and every group re-reads its replica
from the start - committed there, never left without offsets (consumers at
``auto.offset.reset=latest`` would skip what they had not read).  With ``signing.secret`` the
keys are derived, not stored: the same failover on a fresh store moves every group exactly.
A foreign writer's offset syncs claiming copies where the replica holds none (a transaction
marker, past the end) move no group either (security review 8, R8-M1).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from drkit.kafka import KafkaAdmin
from drkit.kafka.io import consume_ranges, produce_batch
from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun, OffsetSync
from drkit.topology.internal_topics import offset_syncs_topic
from drkit.translation import CLAIMED_LIMIT
from tests.conftest import Names
from tests.failover_support import (
    PARTITIONS,
    PER_PARTITION,
    assert_groups_resume_exactly,
    drkit,
    replicated_setup,
)
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import FlowSetup

SECRET = "0123456789abcdef0123456789abcdef-drkit-test"


def _fresh_store(setup: FlowSetup, tmp_path: Path) -> None:
    """Point the deployment at a new, empty store - nothing carried over."""
    document = yaml.safe_load(setup.path.read_text())
    document["state_store"] = {"url": f"sqlite:///{tmp_path / 'restored.db'}"}
    setup.path.write_text(yaml.safe_dump(document))


def test_a_store_without_the_workers_key_blocks_a_switchover_and_a_failover_re_reads(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup, groups = replicated_setup(dc1, dc2, names, tmp_path)
    _fresh_store(setup, tmp_path)

    switchover = drkit(setup, "switchover", "--from", setup.source, "--to", setup.target,
                       "--plan", "-o", "json")  # fmt: skip
    assert switchover.code == 4, switchover.err  # a plan with a blocker
    blockers = {f["code"]: f["message"] for f in switchover.json()["blockers"]}
    assert "none of the" in blockers["offset_syncs_unverifiable"], blockers
    assert "signing.secret" in blockers["offset_syncs_unverifiable"]
    refused = drkit(setup, "switchover", "--from", setup.source, "--to", setup.target, "--yes")
    assert refused.code == 4 and "none of the" in refused.out + refused.err, refused.out

    done = drkit(setup, "failover", "--from", setup.source, "--to", setup.target, "--yes",
                 "-o", "json")  # fmt: skip
    assert done.code == 0, done.err
    warnings = {f["code"] for f in done.json()["plan"]["warnings"]}
    assert "offset_syncs_unverifiable" in warnings, warnings
    target = KafkaAdmin(setup.target_endpoint)
    replica = f"{setup.source}.{next(iter(next(iter(groups.values())))).topic}"
    starts = target.list_offsets(
        [TopicPartition(replica, p) for p in range(PARTITIONS)], "earliest"
    )
    for group in groups:
        committed = target.group_offsets(group).offsets
        # Every group committed, at the replica's start: re-reads, nothing skipped.
        assert committed == starts, (group, committed)


def test_with_a_signing_secret_a_fresh_store_moves_every_group_exactly(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup, groups = replicated_setup(
        dc1, dc2, names, tmp_path, document_extra={"signing": {"secret": SECRET}}
    )
    _fresh_store(setup, tmp_path)
    done = drkit(setup, "failover", "--from", setup.source, "--to", setup.target, "--yes",
                 "-o", "json")  # fmt: skip
    assert done.code == 0, done.err + done.out
    codes = {f["code"] for f in done.json()["plan"]["warnings"]}
    assert "unverified_offset_syncs" not in codes and "offset_syncs_unverifiable" not in codes
    topic = next(iter(next(iter(groups.values())))).topic
    assert_groups_resume_exactly(setup, f"{setup.source}.{topic}", groups)


def test_forged_claims_at_a_transaction_marker_and_past_the_end_move_no_group(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """An exactly-once flow leaves a commit marker on the target after each transaction: a
    position no record holds.  A foreign writer of the offset-sync topic claims a source offset
    past the replicated end (its own record doubts it) copied at the first marker, and 4,097
    more each copied past the replica's end.  Before corroboration the marker claim sent every
    group of the partition above the marker back to it, and the 4,097 (one more than
    CLAIMED_LIMIT) sent every group of the partition to the replica's start; the loader reads
    the replica at each claimed position, finds no copy of the claimed source offset, and
    believes none of them."""
    setup, groups = replicated_setup(
        dc1, dc2, names, tmp_path, exactly_once=True,
        document_extra={"signing": {"secret": SECRET}},
    )  # fmt: skip
    topic = next(iter(next(iter(groups.values())))).topic
    replica = TopicPartition(f"{setup.source}.{topic}", 0)
    end = KafkaAdmin(setup.target_endpoint).list_offsets([replica], "latest")[replica]
    held = {r.offset for r in consume_ranges(setup.target_endpoint, {replica: (0, end)}, 60.0)}
    markers = sorted(set(range(end)) - held)
    assert markers, "an exactly-once flow's replica holds commit markers"
    source = TopicPartition(topic, 0)
    past = PER_PARTITION + 10
    forged = [OffsetSync(source, replica, OffsetRun(PER_PARTITION + 5, markers[0], 1))] + [
        OffsetSync(source, replica, OffsetRun(past + i, end + 1_000_000 + i, 1))
        for i in range(CLAIMED_LIMIT + 1)
    ]
    produce_batch(
        setup.target_endpoint,
        offset_syncs_topic(setup.source),
        [(sync.key(), sync.value()) for sync in forged],  # no MAC
    )
    done = drkit(setup, "failover", "--from", setup.source, "--to", setup.target, "--yes",
                 "-o", "json")  # fmt: skip
    assert done.code == 0, done.err + done.out
    codes = {f["code"] for f in done.json()["plan"]["warnings"]}
    assert "unverified_offset_syncs" in codes and "offset_syncs_unverifiable" not in codes
    assert_groups_resume_exactly(setup, replica.topic, groups)
