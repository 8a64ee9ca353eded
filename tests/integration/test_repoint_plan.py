"""``drkit flows repoint --plan`` on real brokers (issue 48 item 1, docs/three-dc.md): one source
replicated to two standbys; the far one's worker stopped while the near one copies more; the
source killed.  The plan says, per partition, that the far standby follows the near one from
the first record it lacks (its own progress, on the near replica), with the rest to copy - and,
asked the other way round, that the standby is ahead by exactly those records.  Nothing changes
on any cluster.

The source is a ``scratch`` cluster (killed); the standbys the shared ``dc2`` (near) and ``dc1``
(far), as in tests/integration/test_three_clusters.py."""

from __future__ import annotations

from pathlib import Path

from drkit.kafka import KafkaAdmin
from drkit.records import TopicPartition
from tests.conftest import Names
from tests.failover_support import (
    PARTITIONS,
    PER_PARTITION,
    drkit,
)
from tests.kafka_backends import ClusterUnderTest
from tests.three_clusters import far_behind, replica_of

MORE = 40  # records per partition only the near standby copies


def test_the_plan_shows_where_the_far_standby_follows_the_near_one_from(
    scratch: ClusterUnderTest,
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
) -> None:
    topic = names.topic("orders")
    # The plan never asks the lost source.
    near, far = far_behind(tmp_path, scratch, dc2, dc1, topic, names, MORE)
    replica = replica_of(near, topic)
    before = {
        side.target: KafkaAdmin(side.target_endpoint).list_offsets(
            [TopicPartition(replica, p) for p in range(PARTITIONS)], "latest"
        )
        for side in (near, far)
    }

    refused = drkit(near, "flows", "repoint", "--from", near.source, "--to", near.target,
                    "--standby", far.target)  # fmt: skip
    assert refused.code == 2, refused.out + refused.err  # the pointer is not on it: no failover
    assert "drkit failover --from" in refused.out + refused.err, refused.out + refused.err

    planned = drkit(near, "flows", "repoint", "--from", near.source, "--to", near.target,
                    "--standby", far.target, "--plan", "--output", "json")  # fmt: skip
    assert planned.code == 0, planned.out + planned.err
    rows = {row["origin"]: row for row in planned.json()["partitions"]}
    ours = {row: rows[row] for row in rows if row.startswith(f"{topic}-")}
    assert sorted(ours) == sorted(f"{topic}-{p}" for p in range(PARTITIONS)), rows
    for p in range(PARTITIONS):
        row = ours[f"{topic}-{p}"]
        # Replicas hold the source's offsets one for one (no restart, no transaction): the far
        # standby lacks origin offsets PER_PARTITION.. and the near one holds them from there.
        assert row["state"] == "follow", row
        assert (row["frontier"], row["start"]) == (PER_PARTITION, PER_PARTITION), row
        assert (row["to_copy"], row["unreachable"], row["holes"]) == (MORE, 0, 0), row
        assert row["evidence"] == "map", row
        assert row["promoted_replica"] == row["standby_replica"] == f"{replica}-{p}", row

    text = drkit(near, "flows", "repoint", "--from", near.source, "--to", near.target,
                 "--standby", far.target, "--plan")  # fmt: skip
    assert text.code == 0, text.err
    assert "plan only: nothing changed" in text.out, text.out

    # The other way round: the near standby holds MORE records per partition the far one never
    # had - nothing to copy, and they are named.
    backwards = drkit(near, "flows", "repoint", "--from", near.source, "--to", far.target,
                      "--standby", near.target, "--plan", "--output", "json")  # fmt: skip
    assert backwards.code == 0, backwards.out + backwards.err
    for row in backwards.json()["partitions"]:
        if row["origin"].startswith(f"{topic}-"):
            assert row["state"] == "standby_ahead", row
            wanted = (PER_PARTITION, PER_PARTITION + MORE, MORE, PER_PARTITION)
            assert (row["first"], row["end"], row["records"], row["start"]) == wanted, row

    after = {
        side.target: KafkaAdmin(side.target_endpoint).list_offsets(
            [TopicPartition(replica, p) for p in range(PARTITIONS)], "latest"
        )
        for side in (near, far)
    }
    assert after == before  # read-only
