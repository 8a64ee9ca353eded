"""An independent checker of the failover invariants, run after every fault case.

It reads the clusters with plain confluent-kafka clients - none of drkit's adapter - and the
state store with plain SQL, and checks what ../shared/notes/failure-modes.md asks after every
fault:

1. once fenced, at most one cluster accepts application writes (and after a rollback the source
   does - a rollback that leaves it fenced is an outage);
2. the pointer matches the last succeeded run;
3. every record the source acknowledged before the fence is on the target;
4. no group's committed offset on the target moved backwards;
5. the audit trail agrees with the clusters: a fence the store calls applied is a DENY WRITE
   ACL on the cluster, and no DENY WRITE ACL of drkit's is unknown to the store.

:func:`check` returns every violation found (an empty list: the case held).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from sqlalchemy import create_engine, text

PROBE = b"invariant-probe"


@dataclass(frozen=True)
class Cluster:
    alias: str
    bootstrap: str


@dataclass
class Case:
    """What one fault case hands the checker."""

    source: Cluster
    target: Cluster
    topic: str  # the application topic on the source
    replica: str  # its copy on the target
    partitions: int
    store_url: str
    # Offsets of the target's groups before the fault (to tell a backwards move).
    groups_before: Mapping[str, Mapping[tuple[str, int], int]] = field(default_factory=dict)


def end_offsets(cluster: Cluster, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": f"inv-{uuid.uuid4().hex[:6]}"}
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def values(cluster: Cluster, topic: str, ends: Mapping[int, int]) -> list[bytes]:
    """Every committed value of ``topic`` below ``ends`` per partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"inv-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    out: list[bytes] = []
    try:
        for partition, end in sorted(ends.items()):
            if end <= 0:
                continue
            consumer.assign([TopicPartition(topic, partition, 0)])
            deadline = time.monotonic() + 60
            done = False
            while not done:
                if time.monotonic() > deadline:
                    raise AssertionError(f"reading {cluster.alias}/{topic}[{partition}] timed out")
                for message in consumer.consume(1000, 0.5):
                    if message.error() is not None:
                        done = True  # end of partition (markers, aborted records up to it)
                        break
                    offset = message.offset() or 0
                    if offset < end:
                        out.append(message.value() or b"")
                    if offset + 1 >= end:
                        done = True
                        break
    finally:
        consumer.close()
    return out


def writable(cluster: Cluster, topic: str) -> bool:
    """Whether an application producer can write to ``topic`` now (a probe record)."""
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "delivery.timeout.ms": 15000}
    )
    errors: list[str] = []

    def delivered(err: object, _message: object) -> None:
        if err is not None:
            errors.append(str(err))

    producer.produce(topic, PROBE, on_delivery=delivered)
    producer.flush(20)
    if not errors:
        return True
    if any("AUTHORIZATION" in e for e in errors):
        return False
    raise AssertionError(f"probe write to {cluster.alias}/{topic} failed oddly: {errors}")


def denied_topics(cluster: Cluster, principal: str = "User:*") -> set[str]:
    """Topics with a literal DENY WRITE ACL of ``principal`` (a fence)."""
    return {
        t for t, op, perm in principal_acls(cluster, principal) if (op, perm) == ("WRITE", "DENY")
    }


def principal_acls(cluster: Cluster, principal: str = "User:*") -> set[tuple[str, str, str]]:
    """Every topic ACL of ``principal`` on ``cluster``: (topic, operation, permission) - a
    fence's DENY WRITE and the companion ALLOWs it added alike."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    query = AclBindingFilter(
        ResourceType.TOPIC, None, ResourcePatternType.LITERAL, principal, None,  # type: ignore[arg-type]
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    try:
        found = admin.describe_acls(query, request_timeout=15).result(timeout=20)
    except KafkaException as err:
        raise AssertionError(f"cannot describe ACLs of {cluster.alias}: {err}") from None
    return {(b.name, b.operation.name, b.permission_type.name) for b in found}


def group_offsets(cluster: Cluster, groups: list[str]) -> dict[str, dict[tuple[str, int], int]]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    out: dict[str, dict[tuple[str, int], int]] = {}
    for group in groups:
        future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
        listed = future.result(timeout=20)
        out[group] = {
            (tp.topic, tp.partition): tp.offset
            for tp in listed.topic_partitions or []
            if tp.offset >= 0
        }
    return out


StoreView = tuple[tuple[str, int | None] | None, list[tuple[int, str, str]], set[str]]


def _store(case: Case) -> StoreView:
    engine = create_engine(case.store_url)
    try:
        with engine.connect() as connection:
            pointer = connection.execute(
                text("SELECT cluster, run_id FROM active_pointer WHERE name = 'default'")
            ).first()
            runs = connection.execute(
                text("SELECT id, target, state FROM failover_runs ORDER BY id")
            ).all()
            applied = connection.execute(
                text("SELECT topic FROM fences WHERE cluster = :c AND state = 'applied'"),
                {"c": case.source.alias},
            ).all()
    finally:
        engine.dispose()
    return (
        (pointer[0], pointer[1]) if pointer is not None else None,
        [(int(r[0]), str(r[1]), str(r[2])) for r in runs],
        {str(row[0]) for row in applied},
    )


def check(case: Case, fence_point: Mapping[int, int] | None) -> list[str]:
    """Every invariant violated by the clusters and the store as they are now.

    ``fence_point``: per source partition, the end offset at the fence (None: no fence was
    recorded - a rolled-back or never-started move; then invariant 3 is not checked)."""
    problems: list[str] = []
    pointer, runs, fences_applied = _store(case)
    succeeded = [r for r in runs if r[2] == "succeeded"]
    # 2. The pointer matches the last succeeded run.
    if succeeded:
        last_id, last_target, _ = succeeded[-1]
        if pointer is None or pointer != (last_target, last_id):
            problems.append(f"pointer {pointer} is not the last succeeded run's ({last_target}, "
                            f"run {last_id})")  # fmt: skip
    active = pointer[0] if pointer is not None else case.source.alias
    # 5. The audit trail agrees with the cluster's ACLs.
    denied = denied_topics(case.source) & {case.topic}
    if fences_applied & {case.topic} != denied:
        problems.append(
            f"store says fenced {sorted(fences_applied & {case.topic})}, "
            f"{case.source.alias} denies {sorted(denied)}"
        )
    # 3. Everything acknowledged before the fence is on the target.
    if fence_point is not None:
        before = values(case.source, case.topic, fence_point)
        target_ends = end_offsets(case.target, case.replica, case.partitions)
        copied = set(values(case.target, case.replica, target_ends))
        missing = [v for v in before if v not in copied and v != PROBE]
        if missing:
            problems.append(f"{len(missing)} records acknowledged before the fence are not on "
                            f"{case.target.alias} (e.g. {missing[:3]})")  # fmt: skip
    # 4. No group moved backwards on the target.
    if case.groups_before:
        now = group_offsets(case.target, sorted(case.groups_before))
        for group, offsets in case.groups_before.items():
            for tp, before_offset in offsets.items():
                after = now.get(group, {}).get(tp)
                if after is not None and after < before_offset:
                    problems.append(f"{group} {tp} moved backwards: {before_offset} -> {after}")
    # 1. At most one writable primary (last: the probe writes a record).
    source_writable = writable(case.source, case.topic)
    if active == case.target.alias and source_writable:
        problems.append(f"two writable primaries: the pointer is on {active} and "
                        f"{case.source.alias} still accepts writes to {case.topic}")  # fmt: skip
    if active == case.source.alias and not source_writable:
        problems.append(f"outage: the pointer is on {active} but it refuses writes to "
                        f"{case.topic}")  # fmt: skip
    return problems
