"""Adopted ranges (``drkit-adopted.<source>.internal``) are signed (security review 6, H1): an
adopted record overrides the signed runs below its adoption point, so a reader with the flow's
key trusts only one that verifies; the others are ignored, counted with the rejected offset
syncs and doubted over ``[0, end)`` (drkit/translation.py, invariant 9: round down, never
skip).  The loader runs here over tests/fake_kafka.py's records (a fake tailer)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import drkit.adoption.adopted as adopted_module
import drkit.replication.offset_sync_store as sync_store_module
import drkit.replication.progress as progress_module
from drkit.access.doctor import ClusterFacts, own_topic_findings, own_topics
from drkit.access.roles import role_needs
from drkit.adoption.adopted import AdoptedRanges, adopted_key, adopted_value
from drkit.config import load_config_text
from drkit.config.model import DrkitConfig, Role
from drkit.kafka.clients import ClusterEndpoint
from drkit.offsets.mapping_loader import MappingLoader
from drkit.records import Record, TopicPartition
from drkit.replication.offset_sync import OffsetRun, OffsetSync
from drkit.replication.progress import Progress
from drkit.signing import Kind, Signer
from drkit.topology.internal_topics import adopted_topic, offset_syncs_topic, progress_topic
from drkit.translation import Flag, Method, Mm2Syncs, PartitionMapping, TargetBounds, translate
from tests.fake_kafka import FakeCluster

FLOW = "dc1->dc2"
KEY = bytes(range(32))
OTHER = bytes(range(1, 33))
SOURCE = TopicPartition("orders", 0)
TARGET = TopicPartition("dc1.orders", 0)
SYNCS, PROGRESS, ADOPTED = offset_syncs_topic("dc1"), progress_topic("dc1"), adopted_topic("dc1")
SIGNER = Signer(KEY, Kind.OFFSET_SYNC, FLOW)
CONFIG = (
    "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
    "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n"
)


def _config() -> DrkitConfig:
    return load_config_text(CONFIG, env={})


class _FakeTailer:
    """drkit.kafka.tailer.TopicTailer over a FakeCluster's records (what catch_up yields)."""

    def __init__(self, cluster: FakeCluster, topic: str) -> None:
        self.cluster, self.topic, self.position = cluster, topic, 0

    def catch_up(self, timeout_s: float = 30.0) -> Iterator[Record]:
        records = self.cluster.read(self.topic)[self.position :]
        self.position += len(records)
        for key, value, headers, offset in records:
            yield Record(self.topic, 0, offset, key, value, headers)

    def close(self) -> None:
        pass


@pytest.fixture
def target(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    cluster = FakeCluster("dc2")

    def tailer(endpoint: ClusterEndpoint, topic: str, **kwargs: object) -> _FakeTailer:
        return _FakeTailer(cluster, topic)

    for module in (adopted_module, sync_store_module, progress_module):
        monkeypatch.setattr(module, "TopicTailer", tailer)
    return cluster


def _loader(signer: Signer | None = SIGNER) -> MappingLoader:
    config = _config()
    return MappingLoader(config.flows[0], ClusterEndpoint("dc2", config.clusters["dc2"]),
                         signer=signer)  # fmt: skip


def _run(cluster: FakeCluster, src: int, dst: int, length: int) -> None:
    sync = OffsetSync(SOURCE, TARGET, OffsetRun(src, dst, length))
    key, value = sync.key(), sync.value()
    cluster.write(SYNCS, key, value, (SIGNER.header(key, value),))


def _progress(cluster: FakeCluster, next_offset: int) -> None:
    progress = Progress(SOURCE, next_offset, "w1")
    cluster.write(PROGRESS, progress.key("dc2"), progress.value())


def _adopted(cluster: FakeCluster, syncs: Mm2Syncs, signer: Signer | None) -> None:
    key, value = adopted_key("dc2", SOURCE), adopted_value(syncs, 1)
    cluster.write(ADOPTED, key, value, (signer.header(key, value),) if signer else ())


def test_a_forged_adopted_record_changes_no_translation_and_is_counted(
    target: FakeCluster,
) -> None:
    """The review's reproduction: one unsigned record (``upstream=[0]``, ``downstream=[999]``,
    ``end=10**15``) moved a group at 10 to 1000 - 990 records skipped, flagged nowhere, on a
    flow that was never adopted."""
    _run(target, 0, 0, 1000)
    _progress(target, 1000)
    forged = json.dumps({"upstream": [0], "downstream": [999], "end": 10**15,
                         "end_target": 1000}).encode()  # fmt: skip
    target.write(ADOPTED, adopted_key("dc2", SOURCE), forged)  # a foreign client, no MAC
    _adopted(target, Mm2Syncs((0,), (999,), 10**15, 1000), Signer(OTHER, Kind.ADOPTED, FLOW))
    # A run's MAC does not verify as an adopted range (the kind is signed).
    key = adopted_key("dc2", SOURCE)
    target.write(ADOPTED, key, forged, (SIGNER.header(key, forged),))
    fooled = _loader(None).refresh()[SOURCE]  # a reader that verifies nothing is moved
    assert fooled.adopted is not None
    assert translate(10, fooled, TargetBounds(0, 1000)).target_offset == 1000  # type: ignore[union-attr]

    loader = _loader()
    mapping = loader.refresh()[SOURCE]
    assert mapping.adopted is None
    assert loader.rejected == 3 and loader.accepted == 1  # counted with the offset syncs
    for offset in (10, 500, 999):
        result = translate(offset, mapping, TargetBounds(0, 1000))
        assert result.target_offset == offset, result  # type: ignore[union-attr]
        assert result.method is Method.EXACT  # type: ignore[union-attr]
        assert Flag.UNVERIFIED not in result.flags  # type: ignore[union-attr]


def test_an_ignored_real_adoption_rounds_down_to_the_replica_start_never_skips(
    target: FakeCluster,
) -> None:
    """An adopted record written before adopted ranges were signed (or with a key the store no
    longer has) may be real: below its adoption point the copies of MirrorMaker 2 lie before
    drkit's first run, so a group there re-reads the replica from its start - never resumes
    at drkit's first run (which would skip what MM2 copied after the group's position)."""
    mm2 = Mm2Syncs((0, 100), (0, 100), 200, 200)  # MM2 copied 0..199 to 0..199
    _adopted(target, mm2, None)  # unsigned: written by an earlier drkit adopt
    _run(target, 200, 200, 100)  # drkit's exact runs from the adoption point on
    _progress(target, 300)
    loader = _loader()
    mapping = loader.refresh()[SOURCE]
    assert mapping.adopted is None and loader.rejected == 1
    assert mapping.doubt and mapping.doubt[0][0] == 0
    bounds = TargetBounds(5, 300)
    for offset in (0, 150, 199):
        result = translate(offset, mapping, bounds)
        assert result.target_offset == 5, result  # type: ignore[union-attr]
        assert Flag.UNVERIFIED in result.flags  # type: ignore[union-attr]
    exact = translate(250, mapping, bounds)
    assert exact.target_offset == 250 and exact.method is Method.EXACT  # type: ignore[union-attr]
    # Signed with the flow's key (drkit adopt now), the same record is MM2's range again.
    _adopted(target, mm2, SIGNER.of_kind(Kind.ADOPTED))
    signed = _loader()
    mapping = signed.refresh()[SOURCE]
    assert mapping.adopted == mm2 and signed.accepted == 2
    result = translate(150, mapping, bounds)
    assert result.method is Method.MM2 and result.target_offset == 101  # type: ignore[union-attr]


def test_records_of_another_targets_adoption_are_neither_ranges_nor_counted() -> None:
    ranges = AdoptedRanges("dc2", SIGNER.of_kind(Kind.ADOPTED))
    other = Signer(OTHER, Kind.ADOPTED, "dc1->dc3")
    key, value = adopted_key("dc3", SOURCE), adopted_value(Mm2Syncs((), (), 5, 5), 1)
    assert not ranges.receive(key, value, (other.header(key, value),))
    assert (ranges.rejected, ranges.accepted, ranges.claims, ranges.latest()) == (0, 0, {}, {})
    # A forged tombstone is a claim too (it would hide the real record once compacted).
    assert not ranges.receive(adopted_key("dc2", SOURCE), None, ())
    assert ranges.rejected == 1 and ranges.claims == {SOURCE: [(0, 0)]}


def test_drkit_adopt_writes_adopted_ranges_signed_with_the_flow_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from drkit.adoption import adopt
    from drkit.adoption.adopt import Adopter, PartitionAdoption
    from tests.fake_kafka import FakeClusters

    fakes = FakeClusters("dc1", "dc2")
    monkeypatch.setattr(adopt, "ensure_bookkeeping_topics", lambda *args: None)
    written: dict[str, list[tuple[bytes, bytes, tuple[tuple[str, bytes], ...]]]] = {}

    def produce(endpoint: ClusterEndpoint, topic: str, payloads: Iterator[tuple]) -> int:  # type: ignore[type-arg]
        written.setdefault(topic, []).extend(payloads)
        return len(written[topic])

    monkeypatch.setattr(adopt, "produce_batch", produce)
    config = _config()
    adopter = Adopter(
        config, config.flows[0], "mm2-offset-syncs.dc2.internal", signer=SIGNER,
        connect=fakes.connect,
    )  # fmt: skip
    mm2 = Mm2Syncs((0,), (0,), 10, 10)
    adopter._write([PartitionAdoption(SOURCE, TARGET, mm2, (OffsetRun(10, 10, 5),), 15)])
    ranges = AdoptedRanges("dc2", SIGNER.of_kind(Kind.ADOPTED))
    for key, value, headers in written[ADOPTED]:
        assert ranges.receive(key, value, headers)
    assert ranges.latest() == {SOURCE: mm2} and ranges.rejected == 0


def test_the_doctor_counts_the_adopted_topic_among_drkits_own() -> None:
    """Every translation reads it (adopted flow or not): an open one is named like the others,
    and the roles' ACLs (a READ for each translating role) close it to everyone else."""
    config = _config()
    assert ADOPTED in own_topics(config, "dc2")
    lines = [f.line() for f in own_topic_findings(config, ClusterFacts("dc2", brokers=1,
             authorizer=True, acls=frozenset()))]  # fmt: skip
    assert any(ADOPTED in line and "any client may write" in line for line in lines), lines
    [line] = [f.line() for f in own_topic_findings(config, ClusterFacts("dc2", brokers=1,
              authorizer=False))]  # fmt: skip
    assert ADOPTED in line and "ACLs are the fix" in line
    readers = {role for role in Role for need in role_needs(role, "dc2", config).needs
               if need.resource.name == ADOPTED}  # fmt: skip
    assert readers  # each role that translates reads it: its ACLs exist, the topic is closed


def test_an_adopted_mapping_is_unchanged_for_a_reader_without_a_signer() -> None:
    """Readers that say they do not verify (bench, tests) keep reading adopted ranges."""
    ranges = AdoptedRanges("dc2", None)
    mm2 = Mm2Syncs((), (), 5, 5)
    assert ranges.receive(adopted_key("dc2", SOURCE), adopted_value(mm2, 1), ())
    mapping = PartitionMapping(SOURCE, TARGET, (), adopted=ranges.latest()[SOURCE])
    assert mapping.adopted == mm2
