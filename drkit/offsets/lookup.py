"""Translate consumer groups for an operator or the failover engine.

Live mode reads the groups' committed offsets on the source and translates them with the current
mapping (falling back to provenance search where no mapping exists).  Checkpoint mode - chosen
automatically when the source is unreachable - reports the latest checkpoints and their age.

The JSON form (``Report.to_json``) is a stable schema, ``drkit.offsets.translate/v1``::

    {"schema": "drkit.offsets.translate/v1", "flow": "dc1->dc2", "source": "dc1",
     "target": "dc2", "mode": "live" | "checkpoints", "source_reachable": bool,
     "checkpoint_age_s": float | null,
     "groups": [{"group": str, "partitions": [
        {"source_topic": str, "source_partition": int, "target_topic": str,
         "target_partition": int, "source_offset": int, "target_offset": int,
         "method": "exact" | "mapped" | "provenance" | "clamped" | "checkpoint",
         "expected_rereads": int | null, "unreplicated": int | null, "flags": [str],
         "verified": bool | null}]}],
     "errors": [{"group": str, "source_topic": str, "source_partition": int,
                 "source_offset": int, "reason": str}]}
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from drkit.config.model import DrkitConfig, FlowConfig
from drkit.errors import ConfigError, KafkaError, Problem
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.records import TopicPartition
from drkit.offsets.checkpoint_store import CheckpointStore
from drkit.offsets.mapping_loader import MappingLoader
from drkit.offsets.provenance_search import ProvenanceReader, find_target_offset
from drkit.replication import internal_topics
from drkit.replication.policy import build_policy
from drkit.replication.topic_filter import TopicFilter
from drkit.translation import CannotTranslate, Method, TargetBounds, Translated, translate

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


@dataclass
class Report:
    flow: FlowConfig
    mode: str
    source_reachable: bool
    checkpoint_age_s: float | None = None
    groups: dict[str, list[Row]] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)

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
        }


def find_flow(config: DrkitConfig, source: str, target: str) -> FlowConfig:
    try:
        return config.flow(f"{source}->{target}")
    except KeyError:
        known = ", ".join(f.name for f in config.flows) or "none"
        raise ConfigError(
            [Problem("--from/--to", f"no flow {source}->{target} in the config (flows: {known})")]
        ) from None


def translate_groups(
    config: DrkitConfig,
    flow: FlowConfig,
    groups: list[str],
    use_checkpoints: bool | None = None,
    verify: bool = False,
    source_timeout_s: float = 5.0,
) -> Report:
    """Translate ``groups`` for ``flow``; ``use_checkpoints=None`` picks live when possible."""
    source = KafkaAdmin(ClusterEndpoint(flow.source, config.clusters[flow.source]))
    target_endpoint = ClusterEndpoint(flow.target, config.clusters[flow.target])
    target = KafkaAdmin(target_endpoint)
    target.wait_ready(timeout_s=15)
    reachable = False
    if use_checkpoints is not True:
        try:
            source.wait_ready(timeout_s=source_timeout_s)
            reachable = True
        except KafkaError:
            reachable = False
    if use_checkpoints or not reachable:
        return _from_checkpoints(flow, groups, target, target_endpoint, reachable)
    return _live(flow, groups, source, target, target_endpoint, verify)


def _live(
    flow: FlowConfig,
    groups: list[str],
    source: KafkaAdmin,
    target: KafkaAdmin,
    target_endpoint: ClusterEndpoint,
    verify: bool,
) -> Report:
    report = Report(flow, "live", True)
    selects = TopicFilter.of(flow, build_policy(flow.replication_policy)).selects
    committed = source.groups_offsets(groups)
    loader = MappingLoader(flow, target_endpoint)
    reader: ProvenanceReader | None = None
    try:
        mappings = loader.refresh()
        partitions = {
            tp for offsets in committed.values() for tp in offsets.offsets if selects(tp.topic)
        }
        targets = {
            (mappings[tp].target if tp in mappings else loader.target_of(tp)) for tp in partitions
        }
        existing = target.list_topics()
        targets = {tp for tp in targets if tp.topic in existing}
        start = target.list_offsets(targets, "earliest")
        end = target.list_offsets(targets, "latest")
        source_end = source.list_offsets(partitions, "latest")
        for group in groups:
            offsets = committed.get(group)
            if offsets is None:
                report.errors.append({"group": group, "reason": "group not found on the source"})
                continue
            rows = report.groups.setdefault(group, [])
            for tp, offset in sorted(offsets.offsets.items()):
                if not selects(tp.topic):
                    continue
                mapping = mappings.get(tp)
                target_tp = mapping.target if mapping else loader.target_of(tp)
                if target_tp not in start:
                    report.errors.append(_error(group, tp, offset, "no replica on the target"))
                    continue
                bounds = TargetBounds(start[target_tp], end[target_tp])
                result = (
                    translate(offset, mapping, bounds, source_end.get(tp))
                    if mapping is not None
                    else CannotTranslate(tp, offset, "no offset mapping for this partition")
                )
                if isinstance(result, CannotTranslate) or verify:
                    reader = reader or ProvenanceReader(target_endpoint)
                row = _row(result, target_tp, bounds, reader)
                if row is None:
                    assert isinstance(result, CannotTranslate)
                    report.errors.append(_error(group, tp, offset, result.reason))
                else:
                    rows.append(row)
    finally:
        loader.close()
        if reader is not None:
            reader.close()
    return report


def _row(
    result: Translated | CannotTranslate,
    target_tp: TopicPartition,
    bounds: TargetBounds,
    reader: ProvenanceReader | None,
) -> Row | None:
    if isinstance(result, CannotTranslate):
        if reader is None or bounds.end <= bounds.start:
            return None
        found = find_target_offset(reader, target_tp, result.source_offset, bounds)
        if found is None:
            return None
        offset, exact = found
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
            exact,
        )
    verified = None
    if reader is not None and result.target_offset < bounds.end:
        at_t = reader.source_offset_at(result.target, result.target_offset)
        verified = at_t is not None and (
            at_t[1] == result.source_offset
            if result.method is Method.EXACT
            else at_t[1] >= result.source_offset
        )
    return Row(
        result.source.topic,
        result.source.partition,
        result.target.topic,
        result.target.partition,
        result.source_offset,
        result.target_offset,
        result.method.value,
        result.expected_rereads,
        result.unreplicated,
        sorted(f.value for f in result.flags),
        verified,
    )


def _error(group: str, tp: TopicPartition, offset: int, reason: str) -> dict[str, Any]:
    return {
        "group": group,
        "source_topic": tp.topic,
        "source_partition": tp.partition,
        "source_offset": offset,
        "reason": reason,
    }


def _from_checkpoints(
    flow: FlowConfig,
    groups: list[str],
    target: KafkaAdmin,
    target_endpoint: ClusterEndpoint,
    reachable: bool,
) -> Report:
    store = CheckpointStore(target_endpoint, internal_topics.checkpoints_topic(flow.source))
    try:
        snapshot = store.refresh()
    finally:
        store.close()
    report = Report(flow, "checkpoints", reachable, snapshot.age_s())
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
