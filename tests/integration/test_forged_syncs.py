"""A forged offset sync on a real flow's topic is ignored and named (issue 46, item 7).

A foreign producer - any client of an un-ACLed target - writes an offset sync that maps source
offsets far ahead into drkit's offset-sync topic, beside the runs a real ``drkit replicate``
wrote (signed with the flow's key from the state store, drkit/signing.py).  ``drkit offsets
translate`` ignores it, translates as before, and says how many syncs it ignored (so does the
failover plan); a reader that does not verify is fooled by it (the forgery would have skipped
records).
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from drkit.cli import cli
from drkit.kafka.admin import KafkaAdmin, TopicSpec
from drkit.kafka.io import produce_batch
from drkit.offsets.lookup import translate_offsets
from drkit.records import TopicPartition
from drkit.replication.offset_sync import OffsetRun, OffsetSync
from drkit.signing import MAC_HEADER
from drkit.topology.internal_topics import offset_syncs_topic
from tests.conftest import Names
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import Replicator, flow_setup, progress_behind, wait_until

RECORDS = 200


def test_a_forged_offset_sync_is_ignored_by_offsets_translate_and_named(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("orders")
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    produce_batch(setup.source_endpoint, topic, ((f"k{i}".encode(), b"v") for i in range(RECORDS)))
    with Replicator(setup, "--no-checkpoints", log_dir=tmp_path):
        wait_until(lambda: not progress_behind(setup, topic), 90, 0.5, what="replicated")

    # The foreign writer: source 50..149 "copied" at 100,000.. - no MAC, then a made-up one.
    replica = f"{setup.source}.{topic}"
    forged = OffsetSync(
        TopicPartition(topic, 0), TopicPartition(replica, 0), OffsetRun(50, 100_000, 100)
    )
    produce_batch(
        setup.target_endpoint,
        offset_syncs_topic(setup.source),
        [
            (forged.key(), forged.value()),
            (forged.key(), forged.value(), ((MAC_HEADER, b"\x01" * 32),)),
        ],
    )

    # A reader that does not verify follows the forgery: a consumer at 60 would skip 60..199.
    fooled = translate_offsets(
        setup.config, setup.config.flows[0], {TopicPartition(topic, 0): 60}, keys=None,
        connect=KafkaAdmin,
    )  # fmt: skip
    fooled_row = fooled.groups["(given offsets)"][0]
    assert fooled_row.target_offset > 60, fooled_row

    done = CliRunner().invoke(cli, [
        "offsets", "translate", "--config", str(setup.path), "--from", setup.source,
        "--to", setup.target, "--offset", f"{topic}:0:60", "-o", "json",
    ])  # fmt: skip
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    row = document["groups"][0]["partitions"][0]
    assert (row["source_offset"], row["target_offset"], row["method"]) == (60, 60, "exact"), row
    assert document["unverified_offset_syncs"] == 2
    assert document["warnings"] == [
        f"2 offset syncs on {setup.target} failed verification and were ignored (not signed "
        "with the flow's key: forged, or written before drkit signed them); positions they "
        "could hide are rounded down (flag 'unverified': more re-reads, never a skip)"
    ]
    # The table says it too, on stderr.
    text = CliRunner().invoke(cli, [
        "offsets", "translate", "--config", str(setup.path), "--from", setup.source,
        "--to", setup.target, "--offset", f"{topic}:0:60",
    ])  # fmt: skip
    assert text.exit_code == 0, text.output
    assert f"warning: 2 offset syncs on {setup.target} failed verification" in text.output

    # A failover plan names them as a warning.
    plan = CliRunner().invoke(cli, [
        "failover", "--config", str(setup.path), "--from", setup.source, "--to", setup.target,
        "--plan", "-o", "json",
    ])  # fmt: skip
    assert plan.exit_code == 0, plan.output
    warnings = {f["code"]: f for f in json.loads(plan.stdout)["warnings"]}
    found = warnings["unverified_offset_syncs"]
    assert found["message"].startswith(
        f"2 offset syncs on {setup.target} failed verification and were ignored"
    ), found
