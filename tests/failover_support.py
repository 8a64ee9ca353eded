"""Helpers for failover acceptance tests: run drkit commands, read groups back by provenance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import commit_group_offsets, consume_ranges, produce_batch
from drkit.records import TopicPartition
from drkit.replication.progress import ProgressStore
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from drkit.topology.flow import FlowTopology
from tests.conftest import Names
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import FlowSetup, Replicator, flow_setup, wait_until


@dataclass(frozen=True)
class Done:
    code: int
    out: str
    err: str

    def json(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.out)
        return document


def drkit(
    setup: FlowSetup, *args: str, timeout_s: float = 180.0, env: Mapping[str, str] | None = None
) -> Done:
    """``drkit --state-dir <tmp>/state ARGS --config <setup>`` as a child process (``env``:
    extra environment variables, e.g. ``DRKIT_FAILPOINTS``)."""
    state = setup.path.parent / "state"
    command = [sys.executable, "-m", "drkit", "--state-dir", str(state), *args]
    command += ["--config", str(setup.path)]
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout_s, check=False, env=environment
    )
    return Done(done.returncode, done.stdout, done.stderr)


def with_config(setup: FlowSetup, **sections: Any) -> FlowSetup:
    """Rewrite the setup's config file with extra top-level sections (e.g. failover).  A new
    ``state_store`` gets the old store's flow keys: the same deployment's signing keys
    (drkit/store/flow_keys.py), without which no offset sync its workers wrote verifies."""
    document = yaml.safe_load(setup.path.read_text())
    old_store = (document.get("state_store") or {}).get("url")
    new_store = (sections.get("state_store") or {}).get("url")
    if old_store and new_store and new_store != old_store:
        _carry_flow_keys(old_store, new_store)
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(document.get(key), dict):
            document[key] = {**document[key], **value}
        else:
            document[key] = value
    setup.path.write_text(yaml.safe_dump(document))
    return setup


def _carry_flow_keys(old_url: str, new_url: str) -> None:
    from sqlalchemy import select

    from drkit.store import StateStore
    from drkit.store.models import FlowKey

    old, new = StateStore(old_url), StateStore(new_url)
    old.ensure_current()
    new.ensure_current()
    with old.session() as session:
        keys = {row.flow: row.secret for row in session.scalars(select(FlowKey))}
    with new.session() as session:
        held = set(session.scalars(select(FlowKey.flow)))
        session.add_all(FlowKey(flow=f, secret=k) for f, k in keys.items() if f not in held)
    old.engine.dispose()
    new.engine.dispose()


def resumes_at(
    endpoint: ClusterEndpoint, committed: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int | None]:
    """Per target partition: the source offset (provenance) of the first record a consumer
    at the committed offset reads there, or None when it reads nothing (at the end)."""
    admin = KafkaAdmin(endpoint)
    ends = admin.list_offsets(list(committed), "latest")
    out: dict[TopicPartition, int | None] = {}
    for tp, offset in committed.items():
        first = next(iter(consume_ranges(endpoint, {tp: (offset, ends[tp])}, 30.0)), None)
        out[tp] = (
            Provenance.decode(first.header(SOURCE_HEADER) or b"").offset
            if first is not None
            else None
        )
    return out


def read_from(
    endpoint: ClusterEndpoint, committed: Mapping[TopicPartition, int]
) -> dict[TopicPartition, list[int]]:
    """Every source offset (provenance) a consumer starting at ``committed`` reads, in order."""
    admin = KafkaAdmin(endpoint)
    ends = admin.list_offsets(list(committed), "latest")
    out: dict[TopicPartition, list[int]] = {}
    for tp, offset in committed.items():
        out[tp] = [
            Provenance.decode(r.header(SOURCE_HEADER) or b"").offset
            for r in consume_ranges(endpoint, {tp: (offset, ends[tp])}, 60.0)
        ]
    return out


# -- a flow with groups at known positions -----------------------------------------------------

PARTITIONS = 3
PER_PARTITION = 400


def fill(endpoint: ClusterEndpoint, topic: str, per_partition: int, start: int = 0) -> None:
    for partition in range(PARTITIONS):
        produce_batch(
            endpoint,
            topic,
            ((None, f"{partition}-{i}".encode()) for i in range(start, start + per_partition)),
            partition=partition,
        )


def progress_of(setup: FlowSetup) -> dict[TopicPartition, int]:
    """Progress stored so far ({} until the worker created its progress topic: reading a
    missing bookkeeping topic raises)."""
    topology = FlowTopology.of(setup.config.flows[0])
    store = ProgressStore(setup.target_endpoint, topology.progress_topic, missing_ok=True)
    try:
        return {tp: p.next_offset for tp, p in store.refresh().items()}
    finally:
        store.close()


def checkpointed(setup: FlowSetup, expected: dict[str, dict[TopicPartition, int]]) -> bool:
    from drkit.offsets.checkpoint_store import CheckpointStore

    topology = FlowTopology.of(setup.config.flows[0])
    store = CheckpointStore(setup.target_endpoint, topology.checkpoints_topic)
    try:
        snapshot = store.refresh()
    finally:
        store.close()
    for group, offsets in expected.items():
        found = {
            TopicPartition(str(c.info.get("source_topic")), tp.partition): c.upstream_offset
            for tp, c in snapshot.for_group(group).items()
        }
        if found != offsets:
            return False
    return True


def groups_at_positions(topic: str, names: Names) -> dict[str, dict[TopicPartition, int]]:
    """Groups at the start, in the middle, at the end and lagging far behind."""
    at = {
        "start": 0,
        "middle": PER_PARTITION // 2,
        "end": PER_PARTITION,
        "lagging": PER_PARTITION // 10,
    }
    return {
        names.group(label): {TopicPartition(topic, p): offset for p in range(PARTITIONS)}
        for label, offset in at.items()
    }


def source_with_groups(
    setup: FlowSetup, topic: str, names: Names, writer: FlowSetup | None = None
) -> dict[str, dict[TopicPartition, int]]:
    """``topic`` created and filled on the source, with groups committed at start, middle, end
    and lagging; returns the groups' positions.  ``writer``: who fills and commits (on secured
    clusters the application's principal; ``setup``, the topic's creator, by default)."""
    KafkaAdmin(setup.source_endpoint).create_topics([TopicSpec(topic, PARTITIONS)])
    app = (writer or setup).source_endpoint
    fill(app, topic, PER_PARTITION)
    groups = groups_at_positions(topic, names)
    for group, offsets in groups.items():
        commit_group_offsets(app, group, offsets)
    return groups


def wait_replicated(
    setup: FlowSetup, topic: str, groups: dict[str, dict[TopicPartition, int]] | None = None
) -> None:
    """Every partition of ``topic`` replicated to PER_PARTITION (and, given ``groups``, their
    checkpoints written)."""
    wait_until(
        lambda: all(
            progress_of(setup).get(TopicPartition(topic, p)) == PER_PARTITION
            for p in range(PARTITIONS)
        ),
        60,
        what="replicated",
    )
    if groups is not None:
        wait_until(lambda: checkpointed(setup, groups), 60, what="checkpoints of every group")


def assert_groups_resume_exactly(
    setup: FlowSetup, replica: str, groups: dict[str, dict[TopicPartition, int]]
) -> None:
    """On the target, each group reads from exactly where it stood on the source: the first
    record is the one it would have read next (nothing skipped, nothing processed twice), and
    it reads every later record once, in order; at the end there is nothing to read."""
    target = KafkaAdmin(setup.target_endpoint)
    for group, offsets in groups.items():
        committed = target.group_offsets(group).offsets
        replicas = {TopicPartition(replica, tp.partition): o for tp, o in offsets.items()}
        assert set(committed) == set(replicas), group
        first = resumes_at(setup.target_endpoint, committed)
        for tp, source_offset in replicas.items():
            expected = None if source_offset == PER_PARTITION else source_offset
            assert first[tp] == expected, (group, tp, committed[tp])
        for tp, offsets_read in read_from(setup.target_endpoint, committed).items():
            assert offsets_read == list(range(replicas[tp], PER_PARTITION)), (group, tp)


def replicated_setup(
    source: ClusterUnderTest, target: ClusterUnderTest, names: Names, tmp_path: Path, **flow: Any
) -> tuple[FlowSetup, dict[str, dict[TopicPartition, int]]]:
    """A flow whose topic (PARTITIONS x PER_PARTITION records) is replicated, with groups
    committed on the source at start, middle, end and lagging; no worker left running."""
    topic = names.topic("orders")
    setup = flow_setup(
        tmp_path, source, target, [topic], groups={"include": [f"{names.prefix}.*"]}, **flow
    )
    groups = source_with_groups(setup, topic, names)
    with Replicator(setup, log_dir=tmp_path):
        wait_replicated(setup, topic)
    return setup, groups
