"""Records that vanish from the source before replication are a recorded loss, never a silent hole;
headers copied by applications are data, not loops.  Real brokers, real ``drkit replicate``."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from drkit.config.model import TruncationPolicy
from drkit.errors import ExitCode
from drkit.kafka import ClusterEndpoint
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import consume_all, produce_batch
from drkit.local.ports import free_port
from drkit.records import TopicPartition
from drkit.replication.loss import LossEvent, LossReason
from drkit.replication.loss_repo import LossRepository
from drkit.replication.progress import ProgressStore
from drkit.replication.provenance import ORIGIN_HEADER, SOURCE_HEADER, Origin, Provenance
from drkit.store import StateStore
from drkit.topology.flow import FlowTopology
from tests.conftest import Names
from tests.kafka_backends import ClusterUnderTest
from tests.metrics_support import metric
from tests.replication_support import FlowSetup, Replicator, flow_setup, wait_until


def _produce(endpoint: ClusterEndpoint, topic: str, start: int, n: int) -> None:
    produce_batch(
        endpoint,
        topic,
        ((f"k{i}".encode(), f"v{i}".encode()) for i in range(start, start + n)),
        partition=0,
    )


def _copied(setup: FlowSetup, replica: str) -> list[int]:
    """Source offsets of the records on the replica (partition 0), in target order."""
    records = consume_all(setup.target_endpoint, replica, timeout_s=30)
    return [Provenance.decode(r.header(SOURCE_HEADER) or b"").offset for r in records]


def _losses(tmp_path: Path, flow: str) -> list[LossEvent]:
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    return LossRepository(store).list(flow)


def _next_offset(setup: FlowSetup, topic: str) -> int | None:
    topology = FlowTopology.of(setup.config.flows[0])
    store = ProgressStore(setup.target_endpoint, topology.progress_topic, missing_ok=True)
    try:
        found = store.refresh().get(TopicPartition(topic, 0))
    finally:
        store.close()
    return found.next_offset if found else None


def _replicate_first_400(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path, **flow: Any
) -> tuple[FlowSetup, str, str]:
    topic = names.topic("orders")
    setup = flow_setup(tmp_path, dc1, dc2, [topic], **flow)
    replica = FlowTopology.of(setup.config.flows[0]).target_topic(topic)
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    _produce(setup.source_endpoint, topic, 0, 400)
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: _next_offset(setup, topic) == 400, 60, what="400 replicated")
    # While replication is stopped: 2,000 more records, then retention takes the first 2,000.
    _produce(setup.source_endpoint, topic, 400, 2000)
    dc1.admin().delete_records({TopicPartition(topic, 0): 2000})
    return setup, topic, replica


def test_records_deleted_before_replication_are_a_recorded_loss(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup, topic, replica = _replicate_first_400(dc1, dc2, names, tmp_path)
    port = free_port()
    flow = setup.config.flows[0].name
    with Replicator(setup, "--metrics-port", str(port), log_dir=tmp_path) as worker:
        wait_until(lambda: _next_offset(setup, topic) == 2400, 60, what="caught up after loss")
        lost = metric(port, "drkit_replication_lost_records_total", flow=flow, topic=topic)
        assert lost == 1600
        assert worker.running
    events = _losses(tmp_path, flow)
    assert [(e.source, e.first_offset, e.last_offset, e.count, e.reason) for e in events] == [
        (TopicPartition(topic, 0), 400, 1999, 1600, LossReason.TRUNCATED)
    ]
    assert "1600 records" in worker.log()
    # Nothing is skipped beyond the loss: every record still on the source was copied once.
    assert _copied(setup, replica) == [*range(400), *range(2000, 2400)]


def test_policy_stop_records_the_loss_and_stops_the_flow(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup, topic, replica = _replicate_first_400(
        dc1, dc2, names, tmp_path, on_source_truncation=TruncationPolicy.STOP.value
    )
    worker = Replicator(setup, log_dir=tmp_path).start()
    assert worker.wait(60) == ExitCode.REPLICATION_STOPPED, worker.log()
    events = _losses(tmp_path, setup.config.flows[0].name)
    assert [(e.first_offset, e.count) for e in events] == [(400, 1600)]
    assert "1600 records" in worker.log()
    assert _next_offset(setup, topic) == 400  # progress did not move past the hole
    assert _copied(setup, replica) == list(range(400))


def test_records_deleted_while_the_worker_lags_behind_are_a_recorded_loss(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("orders")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    replica = FlowTopology.of(setup.config.flows[0]).target_topic(topic)
    dc1.admin().create_topics([TopicSpec(topic, 1)])
    _produce(setup.source_endpoint, topic, 0, 100)
    with Replicator(setup, log_dir=tmp_path) as worker:
        wait_until(lambda: _next_offset(setup, topic) == 100, 60, what="100 replicated")
        assert worker.process is not None
        # Paused (shorter than the session timeout, so it keeps its partition): records are
        # written and deleted before it fetches them.  Its next fetch is out of range.
        os.killpg(worker.process.pid, signal.SIGSTOP)
        try:
            _produce(setup.source_endpoint, topic, 100, 500)
            dc1.admin().delete_records({TopicPartition(topic, 0): 450})
        finally:
            os.killpg(worker.process.pid, signal.SIGCONT)
        _produce(setup.source_endpoint, topic, 600, 50)
        wait_until(lambda: _next_offset(setup, topic) == 650, 60, what="caught up after loss")
    events = _losses(tmp_path, setup.config.flows[0].name)
    assert [(e.first_offset, e.last_offset, e.count) for e in events] == [(100, 449, 350)]
    assert _copied(setup, replica) == [*range(100), *range(450, 650)]


def test_recreated_topic_is_replicated_from_its_start(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("orders")
    setup = flow_setup(tmp_path, dc1, dc2, [topic], topic_refresh_interval_s=1.0)
    replica = FlowTopology.of(setup.config.flows[0]).target_topic(topic)
    admin = dc1.admin()
    admin.create_topics([TopicSpec(topic, 1)])
    _produce(setup.source_endpoint, topic, 0, 300)
    with Replicator(setup, log_dir=tmp_path) as worker:
        wait_until(lambda: _next_offset(setup, topic) == 300, 60, what="300 replicated")
        admin.delete_topics([topic])
        wait_until(lambda: topic not in admin.list_topics(), 30, what="topic deleted")
        time.sleep(2)  # let the worker see the topic gone (a real outage lasts longer)
        admin.create_topics([TopicSpec(topic, 1)])
        _produce(setup.source_endpoint, topic, 1000, 500)  # new topic: offsets 0..499
        wait_until(lambda: len(_copied(setup, replica)) >= 800, 90, what="the new topic replicated")
        assert worker.running, worker.log()
    copied = _copied(setup, replica)
    assert copied == [*range(300), *range(500)], "records of the recreated topic were skipped"


def test_forwarded_headers_are_replicated_and_only_true_loops_are_skipped(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    invoices, orders = names.topic("invoices"), names.topic("orders")
    setup = flow_setup(
        tmp_path, dc1, dc2, [invoices, orders], replication_policy={"kind": "identity"}
    )
    dc1_id = dc1.admin().describe_cluster()[0] or ""
    dc2_id = dc2.admin().describe_cluster()[0] or ""
    for topic in (invoices, orders):
        dc1.admin().create_topics([TopicSpec(topic, 1)])
    # An application on dc1 read dc2's replicated orders and wrote invoices, copying the input
    # headers (as Kafka Streams does): these are new records of dc1 and must reach dc2 - with
    # headers as drkit writes them now and as it wrote them before (a bare cluster id).
    forwarded = {
        "current": (ORIGIN_HEADER, Origin(dc2_id, (dc1_id, orders)).encode()),
        "legacy": (ORIGIN_HEADER, dc2_id.encode()),
    }
    for label, origin_header in forwarded.items():
        produce_batch(
            setup.source_endpoint,
            invoices,
            ((f"{label}-{i}".encode(), b"x") for i in range(25)),
            partition=0,
            headers=(origin_header, (SOURCE_HEADER, f"{setup.target}/{orders}/0/7".encode())),
        )
    # True loops: copies of dc2's records sitting where drkit wrote them on dc1 (both formats).
    # They must not go back to dc2.
    produce_batch(
        setup.source_endpoint,
        orders,
        ((b"loop", b"x") for _ in range(20)),
        partition=0,
        headers=((ORIGIN_HEADER, Origin(dc2_id, (dc1_id, orders)).encode()),),
    )
    produce_batch(
        setup.source_endpoint,
        orders,
        ((b"legacy-loop", b"x") for _ in range(5)),
        partition=0,
        headers=(
            (ORIGIN_HEADER, dc2_id.encode()),
            (SOURCE_HEADER, f"{setup.target}/{orders}/0/3".encode()),
        ),
    )
    produce_batch(setup.source_endpoint, orders, ((b"native", b"x") for _ in range(3)), partition=0)
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: _next_offset(setup, orders) == 28, 60, what="orders processed")
        wait_until(lambda: _next_offset(setup, invoices) == 50, 60, what="invoices processed")
    on_dc2 = consume_all(setup.target_endpoint, invoices, timeout_s=30)
    assert len(on_dc2) == 50, "forwarded records were dropped as loops"
    for record in on_dc2:
        origin = Origin.decode(record.header(ORIGIN_HEADER) or b"")
        assert origin == Origin(dc1_id, (dc2_id, invoices))  # native to dc1 now
        assert Provenance.decode(record.header(SOURCE_HEADER) or b"").topic == invoices
    assert [r.key for r in consume_all(setup.target_endpoint, orders, timeout_s=30)] == [
        b"native"
    ] * 3


def test_topic_recreated_while_replication_was_down_is_replicated_from_its_start(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("orders")
    setup = flow_setup(tmp_path, dc1, dc2, [topic])
    replica = FlowTopology.of(setup.config.flows[0]).target_topic(topic)
    admin = dc1.admin()
    admin.create_topics([TopicSpec(topic, 1)])
    _produce(setup.source_endpoint, topic, 0, 300)
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: _next_offset(setup, topic) == 300, 60, what="300 replicated")
    admin.delete_topics([topic])
    wait_until(lambda: topic not in admin.list_topics(), 30, what="topic deleted")
    admin.create_topics([TopicSpec(topic, 1)])
    _produce(setup.source_endpoint, topic, 1000, 500)  # the new topic's offsets 0..499
    with Replicator(setup, log_dir=tmp_path):
        wait_until(lambda: _next_offset(setup, topic) == 500, 60, what="new topic replicated")
    assert _copied(setup, replica) == [*range(300), *range(500)], "new topic's records skipped"
    # Everything the old topic held had been replicated: nothing to record as lost.
    assert _losses(tmp_path, setup.config.flows[0].name) == []
