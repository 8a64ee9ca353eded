"""Translate consumer groups for an operator or the failover engine.

Live mode reads the groups' committed offsets on the source and translates them with the current
mapping (falling back to provenance search where no mapping exists).  Checkpoint mode - chosen
automatically when the source is unreachable - reports the latest checkpoints and their age.
Given offsets (``translate_offsets``: applications that keep theirs outside Kafka) translate
by the same rule, live, or from the target's offset map alone when the source is gone (mode
``map``).

The JSON form (``Report.to_json``) is a stable schema, ``drkit.offsets.translate/v1``::

    {"schema": "drkit.offsets.translate/v1", "flow": "dc1->dc2", "source": "dc1",
     "target": "dc2", "mode": "live" | "checkpoints" | "map", "source_reachable": bool,
     "checkpoint_age_s": float | null,
     "groups": [{"group": str, "partitions": [
        {"source_topic": str, "source_partition": int, "target_topic": str,
         "target_partition": int, "source_offset": int, "target_offset": int,
         "method": "exact" | "mapped" | "provenance" | "clamped" | "checkpoint",
         "expected_rereads": int | null, "unreplicated": int | null, "flags": [str],
         "verified": bool | null,
         "verification": "match" | "skips" | "rereads" | "foreign" | "unverifiable" | null}]}],
     "errors": [{"group": str, "source_topic": str, "source_partition": int,
                 "source_offset": int, "reason": str}],
     "unverified_offset_syncs": int, "verified_offset_syncs": int,
     "unchecked_offset_sync_claims": int, "warnings": [str]}

``verified`` (with ``--verify``, or for provenance rows) says the record at T is the copy of the
first record a consumer at S reads on the source (see drkit/offsets/verification.py);
``verification`` says how it differs when it does not.  Translations that announced re-reads
(a crash re-replicated a range) verify when the record at T is the earlier copy they announced.

Every name (replica topics, bookkeeping topics) comes from the flow's
:class:`~drkit.topology.flow.FlowTopology`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from drkit.config.loader import configured_flow
from drkit.config.model import DrkitConfig, FlowConfig
from drkit.errors import ConfigError, KafkaError, Problem, UnreachableClusterError
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.partition_reader import PartitionReader
from drkit.kafka.ports import AdminFactory, ClusterAdmin, admins_not_answering
from drkit.offsets.checkpoint_store import CheckpointStore
from drkit.offsets.inputs import read_inputs
from drkit.offsets.mapping_loader import MappingLoader
from drkit.offsets.provenance_search import (
    ProvenanceReader,
    SourcePartition,
    copy_offset,
    find_target_offset,
)
from drkit.offsets.verification import AtTarget, PositionVerdict, replicated_by, verify
from drkit.records import Record, TopicPartition
from drkit.signing import Kind, Signer
from drkit.topology.flow import FlowTopology
from drkit.translation import (
    NO_REPLICA,
    CannotTranslate,
    Flag,
    Method,
    PartitionMapping,
    TargetBounds,
    Translated,
    translate_group,
)

SCHEMA = "drkit.offsets.translate/v1"


@dataclass(frozen=True)
class Row:
    source_topic: str
    source_partition: int
    target_topic: str
    target_partition: int
    source_offset: int
    target_offset: int
    method: str
    expected_rereads: int | None
    unreplicated: int | None
    flags: list[str]
    verified: bool | None = None
    verification: str | None = None


@dataclass
class Report:
    flow: FlowConfig
    mode: str
    source_reachable: bool | None  # None: not probed (checkpoints were asked for)
    checkpoint_age_s: float | None = None
    groups: dict[str, list[Row]] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    # Offset-sync records that failed verification (drkit/signing.py) and were ignored.
    unverified_offset_syncs: int = 0
    # ... and those that verified (none beside rejected ones: the key is not the workers').
    verified_offset_syncs: int = 0
    # Copies rejected records claim that were not checked against the replica (too many to
    # read): the answers they could lower are lowered, flagged 'unchecked' (review 9, R9-M1).
    unchecked_offset_sync_claims: int = 0

    @property
    def warnings(self) -> list[str]:
        return self._signing_warnings() + self._unchecked_warnings()

    def _unchecked_warnings(self) -> list[str]:
        if not self.unchecked_offset_sync_claims:
            return []
        return [
            f"{self.unchecked_offset_sync_claims} copies claimed by offset syncs on "
            f"{self.flow.target} that failed verification were not checked against the "
            "replica's records (too many to read: forged, most likely); positions they could "
            "move back are moved back (flag 'unchecked': more re-reads, never a skip)"
        ]

    def _signing_warnings(self) -> list[str]:
        if not self.unverified_offset_syncs:
            return []
        if not self.verified_offset_syncs:
            return [
                f"none of the {self.unverified_offset_syncs} offset syncs on {self.flow.target} "
                "verifies with this deployment's key: the workers signed them with another key "
                "(the state store was replaced or restored without its flow_keys table, "
                "signing.secret changed, or they were written before drkit signed them); every "
                "position is rounded down to the replica's start (flag 'unverified')"
            ]
        return [
            f"{self.unverified_offset_syncs} offset syncs on {self.flow.target} failed "
            "verification and were ignored (not signed with the flow's key: forged, or written "
            "before drkit signed them); positions they could hide are rounded down (flag "
            "'unverified': more re-reads, never a skip)"
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "flow": self.flow.name,
            "source": self.flow.source,
            "target": self.flow.target,
            "mode": self.mode,
            "source_reachable": self.source_reachable,
            "checkpoint_age_s": self.checkpoint_age_s,
            "groups": [
                {"group": group, "partitions": [asdict(row) for row in rows]}
                for group, rows in sorted(self.groups.items())
            ],
            "errors": self.errors,
            "unverified_offset_syncs": self.unverified_offset_syncs,
            "verified_offset_syncs": self.verified_offset_syncs,
            "unchecked_offset_sync_claims": self.unchecked_offset_sync_claims,
            "warnings": self.warnings,
        }


find_flow = configured_flow  # the flow offsets translate names by --from/--to


def translate_groups(
    config: DrkitConfig,
    flow: FlowConfig,
    groups: list[str],
    use_checkpoints: bool | None = None,
    verify: bool = False,
    source_timeout_s: float = 5.0,
    *,
    keys: Callable[[str], bytes] | None,
    connect: AdminFactory,
) -> Report:
    """Translate ``groups`` for ``flow``; ``use_checkpoints=None`` picks live when possible.
    ``keys``: each flow's key (drkit/store/flow_keys.py ``key_for``): offset syncs that fail
    it are ignored and counted; None verifies nothing (a reader shown being fooled, benches of
    unsigned maps) - no default, so every caller says which.  ``connect``: how it reaches the
    clusters (drkit.kafka.ports) - no default either."""
    topology = FlowTopology.of(flow)
    source_endpoint = ClusterEndpoint(flow.source, config.clusters[flow.source])
    source = connect(source_endpoint)
    target_endpoint = ClusterEndpoint(flow.target, config.clusters[flow.target])
    target = connect(target_endpoint)
    reachable: bool | None = None  # not asked: --from-checkpoints
    if use_checkpoints is not True:
        reachable = _ready(target, source, source_timeout_s)
    else:
        _ready(target, None, source_timeout_s)
    if use_checkpoints or not reachable:
        return _from_checkpoints(topology, groups, target_endpoint, reachable)
    found = source.groups_offsets(groups)
    # Kafka answers a group it does not know with no offsets: not found, like a missing one.
    committed = {g: (o.offsets if (o := found.get(g)) is not None and o.offsets else None)
                 for g in groups}  # fmt: skip
    report = Report(topology.flow, "live", True)
    _translate(report, topology, committed, source, source_endpoint, target, target_endpoint,
               verify, keys)  # fmt: skip
    return report


def _ready(target: ClusterAdmin, source: ClusterAdmin | None, source_timeout_s: float) -> bool:
    """Whether ``source`` answers, once ``target`` (the offset map's home) does - else
    UnreachableClusterError naming the target (exit 3).  Both are first asked at once whether
    they answer Kafka at all (FIRST_ANSWER_S): a hung, TLS-only or non-Kafka listener is named
    in seconds, not after a 15 s metadata wait ending in "Broker transport failure"."""
    asked = {target.endpoint.alias: target}
    if source is not None:
        asked[source.endpoint.alias] = source
    down = admins_not_answering(asked)
    if (why := down.get(target.endpoint.alias)) is not None:
        raise UnreachableClusterError(target.endpoint.alias, target.endpoint.bootstrap_servers, why)
    target.wait_ready(timeout_s=15)
    if source is None or source.endpoint.alias in down:
        return False
    try:
        source.wait_ready(timeout_s=source_timeout_s)
    except KafkaError:
        return False
    return True


# The group name under which ``translate_offsets`` reports offsets given by hand.
GIVEN_OFFSETS = "(given offsets)"


def translate_offsets(
    config: DrkitConfig,
    flow: FlowConfig,
    offsets: Mapping[TopicPartition, int],
    verify: bool = False,
    source_timeout_s: float = 5.0,
    *,
    keys: Callable[[str], bytes] | None,
    kept: KeptLoaders | None = None,
    connect: AdminFactory,
) -> Report:
    """Where a consumer at each given source offset resumes on the target - for applications
    that keep their offsets outside Kafka (Spark, Flink, a database).  The same rule as a
    group's translation; the offset map lives on the target, so the source may be gone (mode
    ``map``: no count of unreplicated records, no ``verify``).  ``kept``: the offset maps kept
    between calls (a long-lived caller's), else read for this call.  ``connect``: how it
    reaches the clusters (drkit.kafka.ports)."""
    topology = FlowTopology.of(flow)
    source_endpoint = ClusterEndpoint(flow.source, config.clusters[flow.source])
    source: ClusterAdmin | None = connect(source_endpoint)
    target_endpoint = ClusterEndpoint(flow.target, config.clusters[flow.target])
    target = connect(target_endpoint)
    if not _ready(target, source, source_timeout_s):
        source = None
        if verify:
            raise ConfigError(
                [Problem("--verify", f"{flow.source} does not answer: nothing to verify against")]
            ) from None
    report = Report(flow, "live" if source is not None else "map", source is not None)
    mine = {tp: offset for tp, offset in offsets.items() if topology.translates(tp.topic)}
    for tp in sorted(set(offsets) - set(mine)):
        report.errors.append(_error(GIVEN_OFFSETS, tp, offsets[tp], f"{flow.name} does not "
                                    "replicate this topic"))  # fmt: skip
    if source is not None:  # a partition the source does not have is named, not asked for
        listed = source.list_topics()
        for tp in sorted(mine):
            info = listed.get(tp.topic)
            if info is None or tp.partition >= info.partition_count:
                why = f"{flow.source} has no topic {tp.topic!r}"
                if info is not None:
                    why = f"{flow.source}'s {tp.topic} has {info.partition_count} partition(s)"
                report.errors.append(_error(GIVEN_OFFSETS, tp, mine.pop(tp), why))
        # A position past the source's log end is no consumer's: translated, it read as
        # replication lag (past_replicated), not as the typo it is (issue 45, sixth trial).
        ends = source.list_offsets(sorted(mine), "latest") if mine else {}
        for tp in sorted(mine):
            if (end := ends.get(tp)) is not None and mine[tp] > end:
                why = f"past {flow.source}'s log end ({end}): no consumer there holds it (a typo?)"
                report.errors.append(_error(GIVEN_OFFSETS, tp, mine.pop(tp), why))
    _translate(report, topology, {GIVEN_OFFSETS: mine}, source, source_endpoint, target,
               target_endpoint, verify, keys, kept)  # fmt: skip
    return report


def parse_offsets(given: Iterable[str], stdin: TextIO | None = None) -> dict[TopicPartition, int]:
    """``TOPIC:PARTITION:OFFSET`` values (``-``: a JSON list of {topic, partition, offset} on
    stdin) as positions; ConfigError naming the one that is not."""
    out: dict[TopicPartition, int] = {}
    for value in given:
        entries = _stdin_offsets(stdin) if value == "-" and stdin else [_one_offset(value)]
        for tp, offset in entries:
            if out.get(tp, offset) != offset:
                raise ConfigError([Problem("--offset", f"{tp} given twice ({out[tp]}, {offset})")])
            out[tp] = offset
    return out


def _one_offset(value: str) -> tuple[TopicPartition, int]:
    parts = value.rsplit(":", 2)
    try:
        topic, partition, offset = parts[0], int(parts[1]), int(parts[2])
    except (IndexError, ValueError):
        raise ConfigError(
            [Problem("--offset", f"{value!r} is not TOPIC:PARTITION:OFFSET (e.g. orders:0:1200)")]
        ) from None
    if not topic or not 0 <= partition < 2**31 or not 0 <= offset < 2**63:
        raise ConfigError(
            [Problem("--offset", f"{value!r}: a topic, a partition below 2^31 and an offset "
                     "below 2^63, both from 0")]  # Kafka's int32 and int64
        )  # fmt: skip
    return TopicPartition(topic, partition), offset


def _whole(value: object) -> int:
    """A JSON number or string holding a whole number: not true (int(True) is 1), 5.5 (int()
    cuts it to 5) or 1e400 (infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"not a whole number: {value!r}")
    return int(value)


def _stdin_offsets(stdin: TextIO) -> list[tuple[TopicPartition, int]]:
    try:
        document = json.loads(stdin.read())
        if not isinstance(document, list) or not document:
            raise TypeError("no positions")  # '{}' and '[]' translated nothing, exit 0
        return [
            _one_offset(f"{e['topic']}:{_whole(e['partition'])}:{_whole(e['offset'])}")
            for e in document
        ]
    except (ValueError, TypeError, KeyError, OverflowError):
        why = "stdin is not a JSON list of {topic, partition, offset}, one or more"
        raise ConfigError([Problem("--offset -", why)]) from None


# A verification reads the source from S until a record the flow replicates; this many records
# the flow leaves out (filtered, loops) in a row and the verification gives up.
VERIFY_SCAN_LIMIT = 10_000


class _Verifier:
    """Reads the first record after S (source) and after T (target) for :func:`verify`."""

    def __init__(
        self,
        topology: FlowTopology,
        source: PartitionReader,
        target: ProvenanceReader,
        replicated: Callable[[Record], bool],
        source_start: dict[TopicPartition, int],
    ) -> None:
        self.topology = topology
        self.source = source
        self.target = target
        self.replicated = replicated
        self.source_start = source_start

    def check(
        self,
        source_tp: TopicPartition,
        source_offset: int,
        target_tp: TopicPartition,
        target_offset: int,
        replicated_end: int | None,
    ) -> PositionVerdict:
        if source_offset < self.source_start.get(source_tp, 0):
            return (
                PositionVerdict.UNVERIFIABLE
            )  # the source no longer holds S: no record to compare
        scanned = 0
        expected: int | None = None
        with closing(self.source.records_from(source_tp, source_offset)) as records:
            for record in records:
                if self.replicated(record):
                    expected = record.offset
                    break
                scanned += 1
                if scanned >= VERIFY_SCAN_LIMIT:
                    return PositionVerdict.UNVERIFIABLE
        first = self.target.first_record(target_tp, target_offset)
        at_target = (
            None
            if first is None
            else AtTarget(
                first.offset, copy_offset(first, SourcePartition(self.topology.source, source_tp))
            )
        )
        return verify(expected, at_target, replicated_end)


def _translate(
    report: Report,
    topology: FlowTopology,
    committed: Mapping[str, Mapping[TopicPartition, int] | None],
    source: ClusterAdmin | None,
    source_endpoint: ClusterEndpoint,
    target: ClusterAdmin,
    target_endpoint: ClusterEndpoint,
    verify_rows: bool,
    keys: Callable[[str], bytes] | None,
    kept: KeptLoaders | None = None,
) -> None:
    """Translate each group's source positions (None: the group was not found) into
    ``report``; ``source`` None: it does not answer (no source ends, no verification).
    ``kept``: loaders kept between calls (else one made for this call and closed)."""
    existing = target.list_topics()
    with _mapping_loader(topology, target_endpoint, keys, kept) as loader:
        reader: ProvenanceReader | None = None
        verifier: _Verifier | None = None
        source_reader: PartitionReader | None = None
        try:
            # A flow that never stored a map (no progress and no offset-sync topic) translates from
            # the data alone; one of the two missing is an error (the loader raises).
            has_map = {topology.progress_topic, topology.offset_syncs_topic} & set(existing)
            mappings = loader.refresh() if has_map else {}
            report.unverified_offset_syncs = loader.rejected
            report.verified_offset_syncs = loader.accepted
            report.unchecked_offset_sync_claims = loader.unchecked_claims if has_map else 0
            partitions = {
                tp
                for offsets in committed.values()
                if offsets is not None
                for tp in offsets
                if topology.translates(tp.topic)
            }
            read = read_inputs(partitions, mappings, topology, target, source, listed=existing)
            if verify_rows and source is not None:
                reader = ProvenanceReader.on(target_endpoint)
                source_reader = PartitionReader(source_endpoint)
                verifier = _Verifier(
                    topology,
                    source_reader,
                    reader,
                    replicated_by(
                        topology.chain,
                        source.describe_cluster()[0] or topology.source,
                        target.describe_cluster()[0] or topology.target,
                    ),
                    {
                        tp: given.source_start
                        for tp, given in read.inputs.items()
                        if given.source_start is not None
                    },
                )
            for group, offsets in committed.items():
                if offsets is None:
                    report.errors.append({"group": group, "reason": "no committed offsets on the "
                                          "source (a typo?)"})  # fmt: skip
                    continue
                rows = report.groups.setdefault(group, [])
                mine = {tp: o for tp, o in offsets.items() if topology.translates(tp.topic)}
                for tp, result in translate_group(mine, read.inputs).items():
                    if isinstance(result, CannotTranslate) and result.reason == NO_REPLICA:
                        report.errors.append(_error(group, tp, result.source_offset, NO_REPLICA))
                        continue
                    if isinstance(result, CannotTranslate) and reader is None:
                        reader = ProvenanceReader.on(target_endpoint)
                    given = read.inputs[tp]
                    assert given.bounds is not None  # else no replica, above
                    row = _row(
                        topology,
                        result,
                        given.mapping,
                        read.replicas[tp],
                        given.bounds,
                        reader,
                        verifier,
                    )
                    if row is None:
                        assert isinstance(result, CannotTranslate)
                        report.errors.append(_error(group, tp, result.source_offset, result.reason))
                    else:
                        rows.append(row)
        finally:
            if reader is not None:
                reader.close()
            if source_reader is not None:
                source_reader.close()


@contextmanager
def _mapping_loader(
    topology: FlowTopology,
    target_endpoint: ClusterEndpoint,
    keys: Callable[[str], bytes] | None,
    kept: KeptLoaders | None,
) -> Iterator[MappingLoader]:
    """The flow's mapping loader: ``kept``'s (lent for the call), else one for this call."""
    name = topology.flow.name
    key = keys(name) if keys is not None else None
    signer = Signer(key, Kind.OFFSET_SYNC, name) if key is not None else None

    def new_loader() -> MappingLoader:
        return MappingLoader(topology.flow, target_endpoint, topology, signer=signer)

    if kept is None:
        with closing(new_loader()) as loader:
            yield loader
    else:
        with kept.borrow((name, target_endpoint.config.model_dump_json(), key), new_loader) as lent:
            yield lent


class KeptLoaders:
    """Mapping loaders kept from one translation to the next (the monitor's ``/api/translate``):
    a flow's loader reads only the offset-sync and progress records appended since its last
    call, and keeps the claims it has checked (drkit.offsets.corroboration) - one made per call
    read both topics from the start each time (security review 7, L4).  Keyed by flow, target
    connection and signing key; one call at a time uses a loader.  Thread-safe."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._kept: dict[tuple[str, str, bytes | None], tuple[threading.Lock, MappingLoader]] = {}

    @contextmanager
    def borrow(
        self, key: tuple[str, str, bytes | None], make: Callable[[], MappingLoader]
    ) -> Iterator[MappingLoader]:
        with self._guard:
            found = self._kept.get(key)
            if found is None:
                found = self._kept[key] = (threading.Lock(), make())
        lock, loader = found
        with lock:
            yield loader

    def close(self) -> None:
        with self._guard:
            kept, self._kept = list(self._kept.values()), {}
        for lock, loader in kept:
            with lock:
                loader.close()


def _row(
    topology: FlowTopology,
    result: Translated | CannotTranslate,
    mapping: PartitionMapping | None,
    target_tp: TopicPartition,
    bounds: TargetBounds,
    reader: ProvenanceReader | None,
    verifier: _Verifier | None,
) -> Row | None:
    if isinstance(result, CannotTranslate):
        if reader is None or bounds.end <= bounds.start:
            return None
        source = SourcePartition(topology.source, result.source)
        found = find_target_offset(reader, target_tp, source, result.source_offset, bounds)
        if found is None:
            return None
        offset, exact = found
        # Without --verify the search itself read the record at T: verified when it is S's copy.
        verdict = (
            verifier.check(result.source, result.source_offset, target_tp, offset, None)
            if verifier is not None
            else None
        )
        return Row(
            result.source.topic,
            result.source.partition,
            target_tp.topic,
            target_tp.partition,
            result.source_offset,
            offset,
            Method.PROVENANCE.value,
            None,
            None,
            [] if exact else ["not_exact"],
            exact if verdict is None else verdict is PositionVerdict.MATCH,
            None if verdict is None else verdict.value,
        )
    verdict = None
    if verifier is not None:
        verdict = verifier.check(
            result.source,
            result.source_offset,
            result.target,
            result.target_offset,
            mapping.replicated_end if mapping is not None else None,
        )
    return Row(
        result.source.topic,
        result.source.partition,
        result.target.topic,
        result.target.partition,
        result.source_offset,
        result.target_offset,
        result.method.value,
        # Rounded down past syncs that failed verification: the copies they hid are re-read
        # too, and no verified run counts them - unknown, not the runs' figure.
        None if Flag.UNVERIFIED in result.flags else result.expected_rereads,
        result.unreplicated,
        sorted(f.value for f in result.flags),
        None if verdict is None else _verified(verdict, result),
        None if verdict is None else verdict.value,
    )


def _verified(verdict: PositionVerdict, result: Translated) -> bool | None:
    """Whether the record at T is what the translation promised."""
    if verdict is PositionVerdict.UNVERIFIABLE:
        return None
    if verdict is PositionVerdict.REREADS and Flag.REORDERED in result.flags:
        # A crash re-replicated a range: any T that skips nothing re-reads it, and the
        # translation said so (expected_rereads).
        return result.expected_rereads > 0
    return verdict is PositionVerdict.MATCH


def _error(group: str, tp: TopicPartition, offset: int, reason: str) -> dict[str, Any]:
    return {
        "group": group,
        "source_topic": tp.topic,
        "source_partition": tp.partition,
        "source_offset": offset,
        "reason": reason,
    }


def _from_checkpoints(
    topology: FlowTopology,
    groups: list[str],
    target_endpoint: ClusterEndpoint,
    reachable: bool | None,
) -> Report:
    store = CheckpointStore(target_endpoint, topology.checkpoints_topic)
    try:
        snapshot = store.refresh()
    finally:
        store.close()
    report = Report(topology.flow, "checkpoints", reachable, snapshot.age_s())
    for group in groups:
        found = snapshot.for_group(group)
        if not found:
            report.errors.append({"group": group, "reason": "no checkpoints for this group"})
            continue
        rows = report.groups.setdefault(group, [])
        for tp, checkpoint in sorted(found.items()):
            info = checkpoint.info
            rows.append(
                Row(
                    str(info.get("source_topic", "")),
                    tp.partition,
                    tp.topic,
                    tp.partition,
                    checkpoint.upstream_offset,
                    checkpoint.downstream_offset,
                    str(info.get("method", "checkpoint")),
                    info.get("rereads"),
                    info.get("unreplicated"),
                    list(info.get("flags", [])),
                )
            )
    return report
