"""A producer that opens a transaction on the promoted cluster and dies: read_committed
consumers stop at its last stable offset; Kafka's kafka-transactions, run by drkit
(drkit.kafka.transactions_tool), names the producer and aborts its transaction - the consumers
then read past it.  The failover step abort_open_transactions names it, and aborts it only
when the run was given --abort-hanging-transactions."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from drkit.config import load_config_text
from drkit.config.model import ClusterConfig
from drkit.failover.context import StepContext
from drkit.failover.model import Plan, Procedure
from drkit.failover.results import TransactionsSettled
from drkit.failover.run_result import RunOptions
from drkit.failover.runs import WARNING_KEY, RunRepository
from drkit.failover.steps.fencing import abort_open_transactions, tool_for
from drkit.kafka.admin import KafkaAdmin, TopicSpec
from drkit.kafka.io import consume_all, produce_batch
from drkit.lag import PartitionRpo
from drkit.local.jars import resolve_bundle
from drkit.records import TopicPartition
from drkit.store import StateStore
from tests.conftest import Names
from tests.kafka_backends import ClusterUnderTest

# An application drkit did not write: 5 records committed, then a transaction of 3 left open
# (its timeout 15 minutes: the coordinator does not end it during the test) - and gone.
DYING_PRODUCER = textwrap.dedent("""
    import os, sys
    from confluent_kafka import Producer
    bootstrap, topic, transactional_id = sys.argv[1:]
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                  "transaction.timeout.ms": 900000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, b"committed", partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, b"left open", partition=0)
    p.flush(30)
    os._exit(0)
""")


def _left_open(dc2: ClusterUnderTest, topic: str, transactional_id: str) -> None:
    """``topic`` (one partition) on dc2: 5 records committed, 3 in a transaction whose producer
    died, 1 written after it - a read_committed consumer gets the 5 only."""
    tp = TopicPartition(topic, 0)
    dc2.admin().create_topics([TopicSpec(topic, 1)])
    subprocess.run(
        [sys.executable, "-c", DYING_PRODUCER, dc2.bootstrap_servers, topic, transactional_id],
        check=True,
        timeout=60,
    )
    produce_batch(dc2.endpoint, topic, [(b"k", b"after")], partition=0)  # behind the open one
    admin = dc2.admin()
    assert admin.stable_offsets([tp])[tp] < admin.list_offsets([tp], "latest")[tp]
    assert len(consume_all(dc2.endpoint, topic, timeout_s=20)) == 5  # stuck at the LSO


def _read_past(dc2: ClusterUnderTest, topic: str) -> None:
    """The transaction is aborted: the consumer reads past it, its three records not data."""
    tp = TopicPartition(topic, 0)
    admin = dc2.admin()
    assert admin.stable_offsets([tp])[tp] == admin.list_offsets([tp], "latest")[tp]
    values = [r.value for r in consume_all(dc2.endpoint, topic, timeout_s=20)]
    assert values == [b"committed"] * 5 + [b"after"]


def test_a_dead_producers_open_transaction_is_named_and_aborted(
    dc2: ClusterUnderTest, names: Names
) -> None:
    topic = names.topic("hanging")
    tp = TopicPartition(topic, 0)
    transactional_id = f"{names.prefix}-app"
    _left_open(dc2, topic, transactional_id)

    resolve_bundle("kafka")
    tool = tool_for(ClusterConfig(bootstrap_servers=dc2.bootstrap_servers), dc2.name)
    [open_one] = tool.open_transactions([tp], 60)
    assert (open_one.topic, open_one.partition, open_one.start_offset) == (topic, 0, 6)
    named = open_one.named(tool.transactional_ids(60))
    assert named.transactional_id == transactional_id
    assert transactional_id in str(named) and f"producer {open_one.producer_id}" in str(named)

    tool.abort(named, 60)

    assert tool.open_transactions([tp], 60) == []
    _read_past(dc2, topic)


def test_the_failover_step_names_it_and_aborts_it_only_when_asked(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    source_topic = names.topic("orders")
    replica = f"dc1.{source_topic}"  # the flow's default prefix policy
    transactional_id = f"{names.prefix}-app"
    _left_open(dc2, replica, transactional_id)
    resolve_bundle("kafka")
    config = load_config_text(
        f"clusters:\n  dc1: {{bootstrap_servers: '{dc1.bootstrap_servers}'}}\n"
        f"  dc2: {{bootstrap_servers: '{dc2.bootstrap_servers}'}}\n"
        "flows: [{source: dc1, target: dc2}]\n",
        env={},
    )
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    runs = RunRepository(store)
    plan = Plan(
        procedure=Procedure.FAILOVER, source="dc1", target="dc2", flow="dc1->dc2",
        reverse_flow=None, source_reachable=False, translation_mode="checkpoints", steps=(),
        groups=(), groups_without_checkpoint=(),
        rpo=(PartitionRpo(source_topic, 0, 0, 0, 0, 0, 0.0),),
        findings=(), pointer_from="dc1", pointer_to="dc2",
    )  # fmt: skip
    run = runs.create(plan, "test", "integration")

    def settle(options: RunOptions) -> tuple[TransactionsSettled, str | None]:
        context = StepContext(
            config, config.flows[0], store, runs, run, options, tmp_path, connect=KafkaAdmin
        )
        outcome = abort_open_transactions(context, 60)
        settled = TransactionsSettled.from_detail(outcome.detail)
        assert settled is not None
        return settled, outcome.detail.get(WARNING_KEY)

    named, warning = settle(RunOptions())
    assert [(t.topic, t.start_offset, t.transactional_id) for t in named.others] == [
        (replica, 6, transactional_id)
    ]
    assert named.aborted == () and named.still_open == (f"{replica}[0]",)
    assert warning is not None and transactional_id in warning
    assert len(consume_all(dc2.endpoint, replica, timeout_s=20)) == 5  # left open

    aborted, warning = settle(RunOptions(abort_hanging_transactions=True))
    assert aborted.aborted == named.others and aborted.still_open == () and warning is None
    _read_past(dc2, replica)
