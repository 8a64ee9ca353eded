"""Schemas on the standby, on real brokers and two real schema registries (Apicurio Registry
2.x from Maven Central, through the Confluent-compatible API the serializers use).

A record serialized against a registry carries only a schema id; the standby's registry must
resolve that id to the *same* schema - an id that exists there with another schema decodes into
garbage without an error (Avro has no framing to notice)."""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from drkit.config.model import SchemaRegistryConfig
from drkit.kafka.admin import KafkaAdmin, TopicSpec
from drkit.kafka.io import commit_group_offsets, consume_ranges, produce_batch
from drkit.local.registry import LocalRegistries
from drkit.records import TopicPartition
from drkit.schemas.catalogue import SchemaVersion
from drkit.schemas.registry import SchemaRegistry
from drkit.topology.flow import FlowTopology
from tests.conftest import Names
from tests.failover_support import checkpointed, drkit, progress_of
from tests.kafka_backends import ClusterUnderTest
from tests.replication_support import Replicator, flow_setup, wait_until

ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "n", "type": "long"}, {"name": "item", "type": "string"}],
}
ORDER_V2 = {  # a compatible evolution: a field with a default
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "qty", "type": "int", "default": 1}],
}
UNRELATED = {"type": "record", "name": "Noise", "fields": [{"name": "x", "type": "double"}]}
PARTITIONS, PER_VERSION, CONSUMED = 2, 30, 20
Serialize = Callable[[Mapping[str, object], SerializationContext], bytes]


@pytest.fixture(scope="module")
def registries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistries]:
    """A registry for dc1 and one for dc2, empty at first, for this module's tests - run the
    way ``drkit local up --schema-registry`` runs them (a test that stops one leaves it
    stopped: the next starts it again)."""
    local = LocalRegistries(tmp_path_factory.mktemp("registries"))
    try:
        local.up(["dc1", "dc2"])
        yield local
    finally:
        local.down()


def _serializer(url: str, schema: Mapping[str, object]) -> Serialize:
    """An application's Avro serializer against the registry at ``url`` (it registers
    ``schema`` under the context's subject on first use)."""
    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(schema))

    def serialize(value: Mapping[str, object], context: SerializationContext) -> bytes:
        data = serializer(value, context)
        assert data is not None
        return bytes(data)

    return serialize


def _delete_subject(url: str, subject: str) -> None:
    for suffix in ("", "?permanent=true"):
        request = urllib.request.Request(f"{url}/subjects/{subject}{suffix}", method="DELETE")
        with contextlib.suppress(urllib.error.HTTPError), urllib.request.urlopen(request):
            pass


def _schema_id(data: bytes) -> int:
    """The id in Confluent's wire format: a zero byte, then the id (4 bytes, big-endian)."""
    return int.from_bytes(data[1:5], "big")


def _catalogue(url: str) -> tuple[SchemaVersion, ...]:
    return SchemaRegistry("test", SchemaRegistryConfig(url=url)).catalogue()


def _registry_config(urls: dict[str, str]) -> tuple[dict[str, object], dict[str, object]]:
    return ({"schema_registry": {"url": urls["dc1"]}}, {"schema_registry": {"url": urls["dc2"]}})


def test_a_failover_leaves_every_schema_id_resolvable_on_the_standby(
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
    registries: LocalRegistries,
) -> None:
    """Producers serialize against dc1's registry (two versions of a subject, ids a fresh
    registry would number differently); replication and the schema sync run; dc1's registry
    is lost before the failover. On dc2 the group resumes at its translated offsets and every
    record it reads deserializes, against dc2's registry, to exactly what was written."""
    urls = registries.urls()
    source_url, target_url = urls["dc1"], urls["dc2"]
    topic, group = names.topic("orders"), names.group("billing")
    # A subject registered and deleted first: dc1's ids start at 2, so a copy that registers
    # the schemas again (in any order) numbers them differently; only one that keeps ids
    # makes the records resolve on dc2.
    noise = SerializationContext("noise", MessageField.VALUE)
    _serializer(source_url, UNRELATED)({"x": 1.0}, noise)
    _delete_subject(source_url, "noise-value")
    setup = flow_setup(
        tmp_path, dc1, dc2, [topic], groups={"include": [group]},
        schema_sync={"enabled": True, "interval_s": 1.0},
        cluster_extra=_registry_config(urls),
    )  # fmt: skip
    source = setup.source_endpoint
    dc1.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    written: dict[int, list[dict[str, object]]] = {p: [] for p in range(PARTITIONS)}
    context = SerializationContext(topic, MessageField.VALUE)
    for version, schema in enumerate((ORDER_V1, ORDER_V2)):
        serialize = _serializer(source_url, schema)
        for partition in range(PARTITIONS):
            orders = [
                {"n": i, "item": f"item-{partition}-{i}", **({"qty": i % 5} if version else {})}
                for i in range(len(written[partition]), len(written[partition]) + PER_VERSION)
            ]
            written[partition] += orders
            produce_batch(
                source, topic, [(None, serialize(o, context)) for o in orders], partition=partition
            )
    consumed = {TopicPartition(topic, p): CONSUMED for p in range(PARTITIONS)}
    commit_group_offsets(source, group, consumed)
    on_dc1 = {v.id: v.content for v in _catalogue(source_url)}
    assert sorted(on_dc1) == [2, 3], on_dc1  # Order v1, Order v2
    ends = {TopicPartition(topic, p): 2 * PER_VERSION for p in range(PARTITIONS)}
    with Replicator(setup, log_dir=tmp_path):
        wait_until(
            lambda: all(progress_of(setup).get(tp) == end for tp, end in ends.items())
            and checkpointed(setup, {group: consumed})
            and {v.id: v.content for v in _catalogue(target_url)} == on_dc1,
            90, 0.5, what="records, checkpoints and schemas (ids kept) on dc2",
        )  # fmt: skip
        assert registries.stop("dc1")  # dc1's registry is lost with its data center
        done = drkit(setup, "failover", "--from", setup.source, "--to", setup.target, "--yes",
                     "-o", "json")  # fmt: skip
    assert done.code == 0, done.err
    warned = {w["code"]: w["message"] for w in done.json()["plan"]["warnings"]}
    assert "unreachable" in warned["schemas_unknown"], warned  # the plan said so first
    step = next(s for s in done.json()["steps"] if s["name"] == "sync_schemas")
    assert step["state"] == "done", step
    assert "unreachable" in step["detail"]["copy"], step  # said, not hidden
    assert step["detail"]["target_versions"] == 2, step
    # Apicurio 2.x has no registry modes: reported, and the failover went on.
    assert step["detail"]["target_mode"].startswith("unsupported"), step
    # The application on dc2: translated offsets, dc2's registry, every record decoded.
    replica = FlowTopology.of(setup.config.flows[0]).target_topic(topic)
    target = KafkaAdmin(setup.target_endpoint)
    committed = target.group_offsets(group).offsets
    assert committed == {TopicPartition(replica, p): CONSUMED for p in range(PARTITIONS)}
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": target_url}))
    ranges = {tp: (offset, 2 * PER_VERSION) for tp, offset in committed.items()}
    read: dict[int, list[object]] = {p: [] for p in range(PARTITIONS)}
    for record in consume_ranges(setup.target_endpoint, ranges, 60.0):
        read[record.partition].append(deserialize(record.value, context))
    assert read == {p: orders[CONSUMED:] for p, orders in written.items()}


def test_a_sync_into_a_registry_that_took_other_writes_copies_nothing_and_names_the_ids(
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
    registries: LocalRegistries,
) -> None:
    """Both registries took writes (dc1's rebuilt empty and written to while dc2 was primary):
    the same id means two schemas. ``drkit schemas sync`` must refuse, name the id, and leave
    dc2's schema as it was - overwriting it would make dc2's records decode into garbage."""
    kept = registries.urls()["dc2"]
    registries.stop("dc1")
    assert "dc1" not in registries.urls()
    urls = registries.up(["dc1", "dc2"])  # dc1's starts again (in memory: empty), dc2's runs on
    assert urls["dc2"] == kept
    source_url, target_url = urls["dc1"], urls["dc2"]
    taken = _serializer(target_url, UNRELATED | {"name": "OnDc2"})(
        {"x": 2.0}, SerializationContext("dc2-only", MessageField.VALUE)
    )
    clashing = _schema_id(taken)
    filler = 0
    while True:  # dc1's registry hands out ids up to the one dc2 used, for other schemas
        schema = UNRELATED | {"name": f"OnDc1n{filler}"}
        made = _serializer(source_url, schema)({"x": 3.0}, SerializationContext(
            f"dc1-only-{filler}", MessageField.VALUE))  # fmt: skip
        filler += 1
        if _schema_id(made) >= clashing:
            break
    before = {v.id: v.content for v in _catalogue(target_url)}
    setup = flow_setup(
        tmp_path, dc1, dc2, [names.topic("unused")],
        schema_sync={"enabled": True}, cluster_extra=_registry_config(urls),
    )  # fmt: skip
    flow = setup.config.flows[0].name
    shown = drkit(setup, "schemas", "sync", "--flow", flow, "--dry-run", "-o", "json")
    assert shown.code == 1, shown.err
    plan = shown.json()
    assert plan["schema"] == "drkit.schemas.plan/v1"
    assert any(c.startswith(f"id {clashing} is a different schema") for c in plan["conflicts"])
    done = drkit(setup, "schemas", "sync", "--flow", flow)
    assert done.code == 1, done.out + done.err
    assert f"id {clashing} is a different schema" in done.err, done.err
    assert "nothing was copied" in done.err
    assert {v.id: v.content for v in _catalogue(target_url)} == before
