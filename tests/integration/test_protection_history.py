"""Protections on real brokers, checked while a move happens (tests/history.py samples the
pointer and each copy's fence every 0.1 s) - the windows an end-of-case check cannot see:

* a switch back vetoed after ``unfence_target`` lifted the old primary's fence (issue 44,
  finding 1): the rollback fences it again, before anything else is relaxed, and at no sample
  did both clusters take the topic's writes;
* a topic created on the source after the plan and before the fence (finding 10): the move
  fences it, drains it and carries its records - never a second writable primary for it;
* a failover across a packet-dropping link, then a failback while the old primary's fence is
  still pending: the failback applies it before it captures the tail.

The same windows over in-memory clusters, under seeded schedules: tests/simulation.
"""

from __future__ import annotations

import base64
import json
import re
import sys
import time
from pathlib import Path

from drkit.control.repo import ControlRepository
from drkit.drills.faults import LocalFaults
from drkit.drills.scenario import FaultKind
from drkit.failover.fences import FenceRepository, FenceState
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import consume_all, produce_batch
from drkit.store import StateStore
from drkit.topology.flow import FlowTopology
from tests import invariants
from tests.conftest import Names
from tests.failover_support import PARTITIONS, drkit, fill, with_config
from tests.history import History
from tests.kafka_backends import ClusterUnderTest
from tests.optional_tools import unavailable
from tests.replication_support import FlowSetup, Replicator, flow_setup, wait_until


def _cluster(setup: FlowSetup, alias: str) -> invariants.Cluster:
    return invariants.Cluster(alias, setup.config.clusters[alias].bootstrap_servers)


def _writable(setup: FlowSetup, alias: str, topic: str) -> bool:
    return topic not in invariants.denied_topics(_cluster(setup, alias))


def _two_way(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path, per_partition: int
) -> tuple[FlowSetup, str]:
    """Flows both ways for one topic, created on both clusters; ``per_partition`` records on
    the first."""
    topic = names.topic("orders")
    setup = flow_setup(tmp_path, dc1, dc2, [re.escape(topic)], reverse=True)
    dc1.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    dc2.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    fill(setup.source_endpoint, topic, per_partition)
    return setup, topic


def _wait_copied(setup: FlowSetup, topic: str, count: int) -> None:
    replica = FlowTopology.of(setup.config.flows[0]).target_topic(topic)
    wait_until(lambda: len(consume_all(setup.target_endpoint, replica, timeout_s=5)) == count,
               60, what="replicated")  # fmt: skip


def _failback_capturing_records_10_to_14(setup: FlowSetup, topic: str, tmp_path: Path) -> History:
    """Fail back to ``setup.source`` (its 5 records per partition, 10-14, written after the
    failover) with a live worker of the way back, sampled throughout; asserts the run
    succeeded and exported exactly those records; returns the samples."""
    first, second = setup.source, setup.target
    tail_file = tmp_path / "tail.jsonl"
    store_url = f"sqlite:///{tmp_path / 'drkit.db'}"
    with (
        Replicator(setup, log_dir=tmp_path),
        History(
            store_url, _cluster(setup, second), topic, also=((_cluster(setup, first), topic),)
        ) as history,  # fmt: skip
    ):
        # replicate_back needs a live worker of the way back (none: it fails at once, naming
        # the command to start): this one reports for it before the failback begins.
        control = ControlRepository(StateStore(store_url))
        back_flow = f"{second}->{first}"
        wait_until(lambda: any(a.age_s < 5 for a in control.acks(back_flow)), 60,
                   what=f"a live worker of {back_flow}")  # fmt: skip
        back = drkit(setup, "failback", "--to", first, "--export-file", str(tail_file),
                     "--yes", "-o", "json", timeout_s=300)  # fmt: skip
        assert back.code == 0, back.err + back.out
        wait_until(lambda: history.moves()[-1:] == [first], 15, what="sampled")
    run = back.json()
    states = {s["name"]: s["state"] for s in run["steps"]}
    assert run["state"] == "succeeded" and states["capture_divergent_tail"] == "done", states
    capture = next(s for s in run["steps"] if s["name"] == "capture_divergent_tail")["detail"]
    assert capture["per_partition"] == {f"{topic}:{p}": 5 for p in range(PARTITIONS)}, capture
    lines = [json.loads(line) for line in tail_file.read_text().splitlines()]
    assert sorted(base64.b64decode(line["value_b64"]).decode() for line in lines) == sorted(
        f"{p}-{i}" for p in range(PARTITIONS) for i in range(10, 15)
    )
    return history


def test_a_switch_back_vetoed_after_unfence_target_fences_the_old_primary_again(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup, topic = _two_way(dc1, dc2, names, tmp_path, 20)
    first, second = setup.source, setup.target
    store_url = f"sqlite:///{tmp_path / 'drkit.db'}"
    with Replicator(setup, log_dir=tmp_path):
        _wait_copied(setup, topic, 20 * PARTITIONS)  # a planned move needs the replica made
        moved = drkit(setup, "switchover", "--from", first, "--to", second, "--yes", "-o", "json",
                      timeout_s=300)  # fmt: skip
        assert moved.code == 0, moved.err + moved.out
        assert not _writable(setup, first, topic) and _writable(setup, second, topic)
        fill(setup.target_endpoint, topic, 5)  # applications write on the new primary
        veto = {"when": "before", "step": "move_pointer",
                "command": ["sh", "-c", "echo no; exit 3"]}  # fmt: skip
        with_config(setup, failover={"hooks": [veto]})
        with History(store_url, _cluster(setup, second), topic,
                     also=((_cluster(setup, first), topic),)) as history:  # fmt: skip
            back = drkit(setup, "switchover", "--from", second, "--to", first, "--yes",
                         "-o", "json", timeout_s=300)  # fmt: skip
            wait_until(lambda: history.samples and history.samples[-1].open_copies
                       == frozenset({f"{second}:{topic}"}), 15,
                       what=f"only {second} open again, sampled")  # fmt: skip
    assert back.code == 7, back.err + back.out  # vetoed
    [run, _first_run] = drkit(setup, "failover", "list", "-o", "json").json()["runs"]
    states = {s["name"]: s["state"] for s in run["steps"]}
    assert run["state"] == "rolled_back", run
    assert states["unfence_target"] == "done", states  # the old primary's fence was lifted ...
    assert states["move_pointer"] == "failed", states
    # ... and is back: the pointer never left the second cluster, which alone takes writes.
    assert set(history.moves()) == {second}, history.moves()
    assert not history.errors and len(history.samples) >= 5, history.errors
    assert history.two_open() == [], history.two_open()
    assert not _writable(setup, first, topic)
    assert produce_batch(setup.target_endpoint, topic, [(None, b"after")], partition=0) == 1
    status = drkit(setup, "status", "--no-probe", "-o", "json").json()
    assert status["active_cluster"] == second


_CREATE_AND_WRITE = """
import sys
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures need it alive
admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
for i in range(count):
    producer.produce(topic, value=f"late-{i}".encode(), partition=i % 3)
sys.exit(1 if producer.flush(60) else 0)
"""


def test_a_topic_created_after_the_plan_is_fenced_drained_and_carried_by_the_move(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic, late = names.topic("orders"), names.topic("orders-late")
    setup = flow_setup(tmp_path, dc1, dc2, [re.escape(names.prefix) + r"\.orders.*"])
    forward = FlowTopology.of(setup.config.flows[0])
    dc1.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    fill(setup.source_endpoint, topic, 20)
    script = tmp_path / "create_late_topic.py"
    script.write_text(_CREATE_AND_WRITE)
    # The plan is made, then - just before the fence - an application creates a topic the
    # flow's pattern matches and writes 40 records to it.
    bootstrap = setup.config.clusters[setup.source].bootstrap_servers
    hook = {"when": "before", "step": "fence_source",
            "command": [sys.executable, str(script), bootstrap, late, "40"]}  # fmt: skip
    with_config(setup, failover={"hooks": [hook]})
    source = _cluster(setup, setup.source)
    with (
        Replicator(setup, log_dir=tmp_path),
        History(f"sqlite:///{tmp_path / 'drkit.db'}", source, late) as history,
    ):
        _wait_copied(setup, topic, 20 * PARTITIONS)
        done = drkit(setup, "switchover", "--from", setup.source, "--to", setup.target,
                     "--yes", "-o", "json", timeout_s=300)  # fmt: skip
        assert done.code == 0, done.err + done.out
        wait_until(lambda: history.moves()[-1:] == [setup.target], 15, what="sampled")
    run = done.json()
    assert run["state"] == "succeeded", run
    # The late topic was fenced with the others and its fence point recorded ...
    assert late in invariants.denied_topics(source)
    fence = next(s for s in run["steps"] if s["name"] == "record_fence_point")["detail"]
    assert {key.rsplit(":", 1)[0] for key in fence["fence_point"]} == {topic, late}, fence
    # ... never the pointer on the target while the late topic still took writes on the source
    assert history.violations(setup.target) == [], history.samples
    # ... and every record it took before the fence reached the target before the move.
    copied = sorted(r.value or b"" for r in consume_all(
        setup.target_endpoint, forward.target_topic(late), timeout_s=60))  # fmt: skip
    assert copied == sorted(f"late-{i}".encode() for i in range(40))
    point = {int(k.rsplit(":", 1)[1]): v for k, v in fence["fence_point"].items()
             if k.startswith(f"{late}:")}  # fmt: skip
    assert invariants.end_offsets(source, late, PARTITIONS) == point


def test_a_move_back_to_a_cluster_a_failover_fenced_is_blocked_and_changes_nothing(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """Issue 44, finding 8: an unplanned failover fenced the old primary, which may hold
    records nobody replicated.  A switchover or a failover back to it would open it without
    capturing them: both are blocked (exit 4, naming failback), nothing changes - the fence
    stays, the pointer stays - and ``--plan`` says the same."""
    setup, topic = _two_way(dc1, dc2, names, tmp_path, 10)
    first, second = setup.source, setup.target
    with Replicator(setup, log_dir=tmp_path):
        _wait_copied(setup, topic, 10 * PARTITIONS)
    failed_over = drkit(setup, "failover", "--from", first, "--to", second, "--yes",
                        "-o", "json", timeout_s=300)  # fmt: skip
    assert failed_over.code == 0, failed_over.err + failed_over.out
    assert not _writable(setup, first, topic) and _writable(setup, second, topic)
    for procedure in ("switchover", "failover"):
        for extra in (["--plan"], ["--yes"]):
            back = drkit(setup, procedure, "--from", second, "--to", first, *extra, "-o", "json")
            assert back.code == 4, (procedure, extra, back.err + back.out)
            assert f"drkit failback --to {first}" in back.out, back.out
    assert not _writable(setup, first, topic) and _writable(setup, second, topic)
    status = drkit(setup, "status", "--no-probe", "-o", "json").json()
    assert status["active_cluster"] == second
    runs = drkit(setup, "failover", "list", "-o", "json").json()["runs"]
    assert [r["procedure"] for r in runs] == ["failover"], runs


def test_a_failback_fences_an_old_primary_an_operator_opened_before_it_captures_the_tail(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """Issue 44, finding 9: after a failover an operator opened the old primary (``fences lift
    --even-if-standby``) and applications wrote to it.  The failback fences it again from its
    first step, before it captures the tail: every record it took is in the exported tail, it
    takes nothing more until the failback opens it, and no sample saw both clusters open."""
    setup, topic = _two_way(dc1, dc2, names, tmp_path, 10)
    first, second = setup.source, setup.target
    with Replicator(setup, log_dir=tmp_path):
        _wait_copied(setup, topic, 10 * PARTITIONS)
    failed_over = drkit(setup, "failover", "--from", first, "--to", second, "--yes",
                        "-o", "json", timeout_s=300)  # fmt: skip
    assert failed_over.code == 0, failed_over.err + failed_over.out
    lifted = drkit(setup, "fences", "lift", "--cluster", first, "--even-if-standby",
                   "-m", "test: rebuilding it")  # fmt: skip
    assert lifted.code == 0, lifted.err + lifted.out
    fill(setup.source_endpoint, topic, 5, start=10)  # accepted: the operator opened it
    history = _failback_capturing_records_10_to_14(setup, topic, tmp_path)
    # Sampled throughout: both open at first (the operator's choice), then the failback fenced
    # the old primary while the pointer was still on the second cluster - and from then on
    # never were both open again.
    samples, old = history.samples, f"{first}:{topic}"
    assert samples and old in samples[0].open_copies, samples[:3]
    closed = next(i for i, sample in enumerate(samples) if old not in sample.open_copies)
    assert samples[closed].pointer == second, samples[closed]
    both = [sample for sample in samples[closed:] if len(sample.open_copies) > 1]
    assert both == [], both
    assert _writable(setup, first, topic) and not _writable(setup, second, topic)


def _drop_packets(faults: LocalFaults, cluster: ClusterUnderTest) -> str:
    """Blackhole ``cluster``'s client ports (iptables DROP: brokers run, connections hang -
    no refusal, no reset); skips the test where iptables or root is missing, fails in CI."""
    how = faults.inject(FaultKind.NETWORK_CUT, cluster.name)
    if "iptables" in how:
        return how
    faults.restore()
    return unavailable(
        "IPTABLES", f"no packet could be dropped ({how})", "apt install iptables, run as root"
    )


def test_a_failover_across_a_dropping_link_leaves_a_pending_fence_the_failback_applies_first(
    scratch: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """Issue 44: a packet-dropping partition to the primary (every connection hangs: no refusal
    to fail fast on) during an unplanned failover, then a failback while the old primary's
    fence is still PENDING - it came back, applications wrote to it, and no monitor ran to
    apply the fence.  The failover ends within its budgets with the fence pending; the failback
    applies it from its first step, while the pointer is still on the other cluster: every
    record the old primary took is in the exported tail, and no sample after the fence saw
    both clusters open."""
    assert scratch.local is not None
    setup, topic = _two_way(scratch, dc2, names, tmp_path, 10)
    first, second = setup.source, setup.target
    store_url = f"sqlite:///{tmp_path / 'drkit.db'}"
    with Replicator(setup, log_dir=tmp_path):
        _wait_copied(setup, topic, 10 * PARTITIONS)
    faults = LocalFaults(scratch.local, tag=f"drkit-test-{names.prefix}")
    try:
        print(_drop_packets(faults, scratch))
        started = time.monotonic()
        failed_over = drkit(setup, "failover", "--from", first, "--to", second, "--yes",
                            "-o", "json", timeout_s=300)  # fmt: skip
        print(f"failover across the dropping link: {time.monotonic() - started:.1f} s")
    finally:
        faults.restore()
    assert failed_over.code == 0, failed_over.err + failed_over.out
    fence = next(s for s in failed_over.json()["steps"] if s["name"] == "fence_source")
    assert fence["detail"]["pending"] is True, fence
    assert FenceRepository(StateStore(store_url)).topics(first, FenceState.PENDING) == {topic}
    # The link is back; nothing applied the fence yet (no monitor): applications write there.
    wait_until(lambda: _writable(setup, first, topic), 60, what=f"{first} answering again")
    fill(setup.source_endpoint, topic, 5, start=10)
    history = _failback_capturing_records_10_to_14(setup, topic, tmp_path)
    samples, old = history.samples, f"{first}:{topic}"
    assert samples and old in samples[0].open_copies, samples[:3]  # the pending fence
    closed = next(i for i, sample in enumerate(samples) if old not in sample.open_copies)
    assert samples[closed].pointer == second, samples[closed]
    both = [sample for sample in samples[closed:] if len(sample.open_copies) > 1]
    assert both == [], both
    assert not history.errors, history.errors
    assert _writable(setup, first, topic) and not _writable(setup, second, topic)
