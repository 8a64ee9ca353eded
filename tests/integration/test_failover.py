"""Failover engine acceptance on real clusters: unplanned failover of a dead primary, planned
switchover under load, a killed engine resumed after every step, two engines at once, and a
plan that changes nothing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from drkit.config import load_config
from drkit.errors import KafkaError
from drkit.failover.fences import FenceRepository, FenceState
from drkit.failover.maintenance import FailoverMaintenance
from drkit.failover.model import Procedure, StepName
from drkit.failover.runbook import load_runbook
from drkit.failover.runs import RunRepository
from drkit.kafka import ClusterEndpoint, KafkaAdmin, make_consumer
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import produce_batch
from drkit.records import TopicPartition
from drkit.replication.provenance import SOURCE_HEADER, Provenance
from drkit.store import StateStore
from drkit.timestamps import iso_utc
from drkit.topology.flow import FlowTopology
from tests import invariants
from tests.conftest import Names
from tests.failover_support import (
    PARTITIONS,
    PER_PARTITION,
    assert_groups_resume_exactly,
    drkit,
    fill,
    progress_of,
    replicated_setup,
    source_with_groups,
    wait_replicated,
    with_config,
)
from tests.history import History
from tests.kafka_backends import ClusterUnderTest
from tests.kip848 import NEW_PROTOCOL, group_type, kip848_first_offsets, kip848_member_commits
from tests.replication_support import FlowSetup, Replicator, flow_setup, wait_until

# -- unplanned --------------------------------------------------------------------------------


def test_unplanned_failover_of_a_killed_primary_resumes_every_group_exactly(
    scratch: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic = names.topic("orders")
    setup = flow_setup(tmp_path, scratch, dc2, [topic], groups={"include": [f"{names.prefix}.*"]})
    replica = FlowTopology.of(setup.config.flows[0]).target_topic(topic)
    groups = source_with_groups(setup, topic, names)
    # Beside the classic groups, one on KIP-848's protocol (a real member committed it).
    next_gen = names.group("next-gen")
    groups[next_gen] = {TopicPartition(topic, p): 7 * (p + 1) for p in range(PARTITIONS)}
    assert kip848_member_commits(setup.source_endpoint, next_gen, groups[next_gen]) == "CONSUMER"
    # Where each group stands, partition by partition (drkit groups lag).
    asked = [arg for group in sorted(groups) for arg in ("--group", group)]
    lag = drkit(setup, "groups", "lag", "--cluster", setup.source, *asked, "-o", "json")
    assert lag.code == 0, lag.err
    rows = {(r["group"], r["partition"]): (r["committed"], r["end"], r["lag_offsets"])
            for r in lag.json()["rows"]}  # fmt: skip
    assert rows == {
        (group, tp.partition): (offset, PER_PARTITION, PER_PARTITION - offset)
        for group, positions in groups.items() for tp, offset in positions.items()
    }  # fmt: skip
    with Replicator(setup, log_dir=tmp_path):
        wait_replicated(setup, topic, groups)
        assert scratch.local is not None
        scratch.local.kill_broker(scratch.name)  # the primary is gone
        done = drkit(setup, "failover", "--from", setup.source, "--to", setup.target, "--yes",
                     "-o", "json")  # fmt: skip
    assert done.code == 0, done.err
    run = done.json()
    assert run["schema"] == "drkit.failover.run/v1" and run["state"] == "succeeded"
    assert run["plan"]["translation_mode"] == "checkpoints"
    translate = next(s for s in run["steps"] if s["name"] == "translate_offsets")
    # Nothing moved between the plan and the step (the source is gone): every group kept the
    # plan's moves instead of being translated again.
    assert translate["detail"]["reused_from_plan"] == len(groups), translate["detail"]
    fence = next(s for s in run["steps"] if s["name"] == "fence_source")
    assert fence["detail"]["pending"] is True  # dc1 unreachable: fenced when it returns
    rpo = {(r["topic"], r["partition"]): r["records"] for r in run["result"]["rpo"]}
    assert rpo == {(topic, p): 0 for p in range(PARTITIONS)}
    assert_groups_resume_exactly(setup, replica, groups)
    # A member on the new protocol joins on dc2 and reads first the record after its commit.
    first = kip848_first_offsets(setup.target_endpoint, replica, next_gen, PARTITIONS)
    assert first == {tp.partition: o for tp, o in groups[next_gen].items()}
    shown = drkit(setup, "failover", "show", "-o", "json")
    assert shown.code == 0 and shown.json()["id"] == run["id"]
    # dc1 returns: it is fenced before anyone can write to it (the monitor runs this duty).
    scratch.local.start_broker(scratch.name)
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    maintenance = FailoverMaintenance(setup.config, store, tmp_path / "state", connect=KafkaAdmin)
    assert setup.source in maintenance.reconcile_protections().changed
    assert scratch.admin().write_denied() == {topic}
    assert FenceRepository(store).topics(setup.source, FenceState.APPLIED) == {topic}
    with pytest.raises(KafkaError, match="TOPIC_AUTHORIZATION_FAILED"):
        produce_batch(setup.source_endpoint, topic, [(None, b"late")], partition=0, timeout_s=10)
    # Lifting the old primary's fence by hand: refused while dc2 is active (a split brain) ...
    lift = ("fences", "lift", "--cluster", setup.source, "-m", "retiring dc1")
    refused = drkit(setup, *lift)
    assert refused.code == 4, refused.out + refused.err
    assert "split brain" in refused.err and scratch.admin().write_denied() == {topic}
    # ... done when the operator says it is being retired: dc1 takes writes again.
    lifted = drkit(setup, *lift, "--even-if-standby", "-o", "json")
    assert lifted.code == 0, lifted.err
    assert lifted.json()["lifted"] == [topic]
    assert scratch.admin().write_denied() == set()
    assert FenceRepository(store).fenced(setup.source) == set()
    produce_batch(setup.source_endpoint, topic, [(None, b"after")], partition=0, timeout_s=10)


# -- planned ----------------------------------------------------------------------------------


class _Producer:
    """Numbers records into dc1 until stopped; counts what dc1 accepted and refused."""

    def __init__(self, endpoint: ClusterEndpoint, topic: str) -> None:
        self.endpoint, self.topic = endpoint, topic
        self.accepted = 0
        self.refused: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                produce_batch(
                    self.endpoint, self.topic, [(None, f"r{n + i}".encode()) for i in range(50)],
                    timeout_s=10,
                )  # fmt: skip
                self.accepted += 50
            except KafkaError as err:
                self.refused.append(str(err))
            n += 50
            self._stop.wait(0.05)

    def __enter__(self) -> _Producer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)


def test_planned_switchover_under_load_loses_nothing_rereads_nothing_and_reverses(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    topic, group, ledger = names.topic("orders"), names.group("billing"), names.group("ledger")
    setup = flow_setup(
        tmp_path, dc1, dc2, [topic], reverse=True, groups={"include": [f"{names.prefix}.*"]}
    )
    forward = FlowTopology.of(setup.config.flows[0])
    backward = FlowTopology.of(setup.config.flows[1])
    dc1.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    dc2.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    processed_on_dc1: list[bytes] = []
    with Replicator(setup, log_dir=tmp_path), _Producer(setup.source_endpoint, topic) as load:
        wait_until(lambda: load.accepted >= 2000, 60, what="load on dc1")
        # The application consumes part of the stream on dc1, commits, and is stopped.
        processed_on_dc1 += _consume_and_commit(setup.source_endpoint, topic, group, 1200)
        # A second application on KIP-848's protocol, stopped at another point.
        ledger_on_dc1 = _consume_and_commit(setup.source_endpoint, topic, ledger, 700, NEW_PROTOCOL)
        source = invariants.Cluster(setup.source, setup.config.clusters[setup.source]
                                    .bootstrap_servers)  # fmt: skip
        # Checked while it happens: never the pointer on dc2 with dc1 still open.
        with History(f"sqlite:///{tmp_path / 'drkit.db'}", source, topic) as history:
            done = drkit(setup, "switchover", "--from", setup.source, "--to", setup.target,
                         "--yes", "-o", "json", timeout_s=300)  # fmt: skip
            wait_until(lambda: history.moves()[-1:] == [setup.target], 10, what="sampled")
        assert done.code == 0, done.err + done.out
        assert history.violations(setup.target) == [], history.samples
        assert history.moves() in ([None, setup.target], [setup.source, setup.target]), (
            history.moves()
        )
        # dc1 refuses writes while fenced.
        wait_until(lambda: load.refused, 30, what="the producer refused by dc1")
        assert "TOPIC_AUTHORIZATION_FAILED" in load.refused[-1]
    run = done.json()
    assert run["state"] == "succeeded"
    states = {s["name"]: s["state"] for s in run["steps"]}
    assert states.pop("unfence_target") == "skipped"  # nothing fenced on dc2
    assert states.pop("sync_schemas") == "skipped"  # no schema registries here
    assert set(states.values()) == {"done"}
    # The application resumes on dc2 from the committed offsets: every record dc1 accepted is
    # processed exactly once across the two clusters.
    committed = KafkaAdmin(setup.target_endpoint).group_offsets(group).offsets
    assert {tp.topic for tp in committed} == {forward.target_topic(topic)}
    # Partitions the group never committed start at the beginning (auto.offset.reset=earliest,
    # on dc2 as on dc1).
    replica_parts = [TopicPartition(forward.target_topic(topic), p) for p in range(PARTITIONS)]
    rest = _values_from(setup.target_endpoint, {tp: committed.get(tp, 0) for tp in replica_parts})
    accepted = _all_values(setup.source_endpoint, topic)
    assert len(accepted) >= load.accepted  # a batch cut by the fence may be partly accepted
    both = processed_on_dc1 + rest
    assert sorted(both) == sorted(accepted), "skipped or re-read records across the switchover"
    # The KIP-848 group too, and a member on the new protocol resumes it where it stopped.
    assert group_type(setup.source_endpoint, ledger) == "CONSUMER"
    moved = KafkaAdmin(setup.target_endpoint).group_offsets(ledger).offsets
    rest = _values_from(setup.target_endpoint, {tp: moved.get(tp, 0) for tp in replica_parts})
    assert sorted(ledger_on_dc1 + rest) == sorted(accepted), "the KIP-848 group moved inexactly"
    stood = KafkaAdmin(setup.source_endpoint).group_offsets(ledger).offsets
    first = kip848_first_offsets(
        setup.target_endpoint, forward.target_topic(topic), ledger, PARTITIONS
    )
    at = {p: stood.get(TopicPartition(topic, p), 0) for p in range(PARTITIONS)}
    assert first == {p: o for p, o in at.items() if o < _end(dc1, TopicPartition(topic, p))}
    # The reverse flow runs: a record written on dc2 reaches dc1.
    produce_batch(setup.target_endpoint, topic, [(None, b"after-switchover")], partition=0)
    with Replicator(setup, log_dir=tmp_path):
        wait_until(
            lambda: (
                b"after-switchover"
                in _all_values(setup.source_endpoint, backward.target_topic(topic))
            ),
            60,
            what="the reverse flow",
        )
    # The independent checker: one writable primary, everything acknowledged before the fence
    # on dc2, the group never moved backwards, the audit trail agrees with dc1's ACLs.
    fence = next(s for s in run["steps"] if s["name"] == "record_fence_point")["detail"]
    point = {int(k.rsplit(":", 1)[1]): v for k, v in fence["fence_point"].items()}
    # The load kept writing to dc1 the whole time: nothing was appended past the fence point.
    source_ends = invariants.end_offsets(source, topic, PARTITIONS)
    assert source_ends == point, (source_ends, point)
    clusters = setup.config.clusters
    case = invariants.Case(
        invariants.Cluster(setup.source, clusters[setup.source].bootstrap_servers),
        invariants.Cluster(setup.target, clusters[setup.target].bootstrap_servers),
        topic, forward.target_topic(topic), PARTITIONS, f"sqlite:///{tmp_path / 'drkit.db'}",
        {group: {(tp.topic, tp.partition): o for tp, o in committed.items()}},
    )  # fmt: skip
    assert invariants.check(case, point) == []


def _end(cluster: ClusterUnderTest, tp: TopicPartition) -> int:
    return cluster.admin().list_offsets([tp], "latest")[tp]


def _consume_and_commit(
    endpoint: ClusterEndpoint,
    topic: str,
    group: str,
    count: int,
    protocol: Mapping[str, str] | None = None,
) -> list[bytes]:
    consumer = make_consumer(endpoint, group, {"auto.offset.reset": "earliest", **(protocol or {})})
    consumer.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < count and time.monotonic() < deadline:
        for message in consumer.consume(100, 0.5):
            if message.error() is None:
                seen.append(message.value() or b"")
    consumer.commit(asynchronous=False)
    consumer.close()
    return seen


def _values_from(endpoint: ClusterEndpoint, committed: Mapping[TopicPartition, int]) -> list[bytes]:
    from drkit.kafka.io import consume_ranges

    ends = KafkaAdmin(endpoint).list_offsets(list(committed), "latest")
    ranges = {tp: (offset, ends[tp]) for tp, offset in committed.items()}
    return [r.value or b"" for r in consume_ranges(endpoint, ranges, 60)]


def _all_values(endpoint: ClusterEndpoint, topic: str) -> list[bytes]:
    from drkit.kafka.io import consume_all

    return [r.value or b"" for r in consume_all(endpoint, topic, timeout_s=60)]


# -- a killed engine resumes; two engines never run at once -----------------------------------


def _state(setup: FlowSetup, groups: dict[str, dict[TopicPartition, int]]) -> Any:
    target = KafkaAdmin(setup.target_endpoint)
    offsets = {g: dict(target.group_offsets(g).offsets) for g in groups}
    return offsets


def _use_store(setup: FlowSetup, name: str) -> FlowSetup:
    """A fresh state store (a new deployment's memory) against the same clusters."""
    return with_config(setup, state_store={"url": f"sqlite:///{setup.path.parent / f'{name}.db'}"})


def test_engine_killed_after_each_step_resumes_to_the_same_result(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup, groups = replicated_setup(dc1, dc2, names, tmp_path)
    policy = {"fence_with_acls": False, "lease_ttl_s": 2.0}
    target = KafkaAdmin(setup.target_endpoint)
    move = ("failover", "--from", setup.source, "--to", setup.target, "--yes", "-o", "json")

    with_config(_use_store(setup, "reference"), failover=policy)
    reference = drkit(setup, *move)
    assert reference.code == 0, reference.err
    expected = _state(setup, groups)
    assert all(expected.values())
    # sync_schemas is skipped for this flow (no registries): a kill after it is a kill before
    # move_pointer, which the kill after commit_group_offsets already is.
    runbook = load_runbook(Procedure.FAILOVER).steps
    steps = [s.name for s in runbook if s.name is not StepName.SYNC_SCHEMAS]
    for step in steps:
        target.delete_groups(list(groups))
        kill = {"when": "after", "step": step.value, "command": ["sh", "-c", "kill -9 $PPID"]}
        with_config(
            _use_store(setup, f"killed-after-{step.value}"), failover={**policy, "hooks": [kill]}
        )
        killed = drkit(setup, *move)
        assert killed.code == -9, (step, killed.err)
        store = StateStore(f"sqlite:///{setup.path.parent / f'killed-after-{step.value}.db'}")
        [run] = RunRepository(store).latest()
        assert run.state.value == "running"
        record = run.step(step)
        assert record is not None and record.state.value in ("done", "skipped")
        with_config(setup, failover={**policy, "hooks": []})  # the killing hook is gone now
        time.sleep(2.5)  # the dead engine's lease expires
        if step is steps[-1]:
            # The monitor's duty resumes a run whose engine died, on its own.
            reloaded = load_config(setup.path)
            assert FailoverMaintenance(
                reloaded, store, tmp_path, connect=KafkaAdmin
            ).resume_stale_runs() == [run.id]
            resumed = drkit(setup, "failover", "show", str(run.id), "-o", "json")
        else:
            resumed = drkit(setup, "failover", "--resume", str(run.id), "--yes", "-o", "json")
        assert resumed.code == 0, (step, resumed.err)
        document = resumed.json()
        assert document["state"] == "succeeded"
        # No step ran twice: the killed step kept its first completion time.
        before = {s.name: s.finished_at for s in run.steps if s.finished_at}
        after = {s["name"]: s["finished_at"] for s in document["steps"]}
        for name, finished in before.items():
            assert after[name.value] == iso_utc(finished), (step, name)
        assert _state(setup, groups) == expected, f"killed after {step.value}"
        pointer = document["result"]["pointer"]
        assert pointer == setup.target


def test_two_concurrent_failovers_exactly_one_proceeds(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup, _groups = replicated_setup(dc1, dc2, names, tmp_path)
    slow = {"when": "before", "step": StepName.STOP_REPLICATION.value, "command": ["sleep", "3"]}
    with_config(setup, failover={"fence_with_acls": False, "hooks": [slow]})
    move = ("failover", "--from", setup.source, "--to", setup.target, "--yes")
    results: list[int] = []
    threads = [
        threading.Thread(target=lambda: results.append(drkit(setup, *move).code)) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(results) == [0, 5], results  # 5: another run holds the lease
    listed = drkit(setup, "failover", "list", "-o", "json").json()["runs"]
    assert len(listed) == 1 and listed[0]["state"] == "succeeded"


def test_plan_changes_nothing(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    setup, groups = replicated_setup(dc1, dc2, names, tmp_path)
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")

    def everything() -> Any:
        store.ensure_current()
        from sqlalchemy import text

        tables = {}
        with store.session() as session:
            for table in ("failover_runs", "failover_steps", "flow_control", "active_pointer",
                          "fences", "leases"):  # fmt: skip
                tables[table] = session.execute(text(f"SELECT * FROM {table}")).all()
        return (
            tables,
            _state(setup, groups),
            KafkaAdmin(setup.source_endpoint).write_denied(),
        )

    before = everything()
    for procedure in ("failover", "switchover"):
        done = drkit(setup, procedure, "--from", setup.source, "--to", setup.target, "--plan",
                     "-o", "json")  # fmt: skip
        assert done.code == 0, done.err
        plan = done.json()
        assert plan["schema"] == "drkit.failover.plan/v2"
        assert len(plan["groups"]) == len(groups)
    assert everything() == before


# -- failback ---------------------------------------------------------------------------------


def test_failback_captures_and_exports_the_divergent_tail_then_switches_back(
    scratch: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    from drkit.control import ControlRepository, DesiredState

    topic = names.topic("orders")
    setup = flow_setup(tmp_path, scratch, dc2, [topic], reverse=True)
    with_config(setup, flows=[{**f, "standby": f["source"] == setup.target}
                              for f in _flows(setup)])  # fmt: skip
    forward = setup.config.flows[0].name
    scratch.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    dc2.admin().create_topics([TopicSpec(topic, PARTITIONS)])
    fill(setup.source_endpoint, topic, 200)
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.ensure_current()
    control = ControlRepository(store)
    tail_file = tmp_path / "tail.jsonl"
    with Replicator(setup, log_dir=tmp_path):
        wait_until(
            lambda: all(
                progress_of(setup).get(TopicPartition(topic, p)) == 200 for p in range(PARTITIONS)
            ),
            60,
            what="replicated",
        )
        directive = control.set(forward, DesiredState.PAUSED, "test: replication falls behind")
        wait_until(
            lambda: any(a.epoch >= directive.epoch for a in control.acks(forward)),
            30,
            what="paused",
        )
        # dc1 accepts records the other side never gets, then dies.
        fill(setup.source_endpoint, topic, 30, start=200)
        assert scratch.local is not None
        scratch.local.kill_broker(scratch.name)
        failover = drkit(setup, "failover", "--from", setup.source, "--to", setup.target,
                         "--yes", "-o", "json")  # fmt: skip
        assert failover.code == 0, failover.err
        # Applications write on dc2 meanwhile; dc1 comes back.
        fill(setup.target_endpoint, topic, 20)
        # A copy of dc1's record 200 of partition 0 reached dc2 but not the progress (a worker
        # killed between the two): no loss - both figures below count past it.
        replica = FlowTopology.of(setup.config.flows[0]).target_topic(topic)
        held_copy = Provenance(setup.source, topic, 0, 200).encode()
        produce_batch(setup.target_endpoint, replica, [(b"0", b"0-200")], partition=0,
                      headers=((SOURCE_HEADER, held_copy),))  # fmt: skip
        scratch.local.start_broker(scratch.name)
        # The monitor's divergence report, once dc1 answers and is fenced.
        maintenance = FailoverMaintenance(setup.config, store, tmp_path, connect=KafkaAdmin)
        first = RunRepository(store).latest(1)[0]

        def reported_yet() -> bool:
            maintenance.tick()
            return (RunRepository(store).get(first.id) or first).result.divergence is not None

        wait_until(reported_yet, 90, what="the divergence reported")
        reported = (RunRepository(store).get(first.id) or first).result.divergence
        assert reported is not None
        back = drkit(setup, "failback", "--to", setup.source, "--export-file", str(tail_file),
                     "--yes", "-o", "json", timeout_s=300)  # fmt: skip
    assert back.code == 0, back.err + back.out
    run = back.json()
    assert run["state"] == "succeeded", run
    capture = next(s for s in run["steps"] if s["name"] == "capture_divergent_tail")["detail"]
    expected = {f"{topic}:{p}": 29 if p == 0 else 30 for p in range(PARTITIONS)}
    assert capture["per_partition"] == expected
    assert capture["records"] == 89
    assert reported.per_partition == expected and reported.records == 89, reported
    assert tail_file.stat().st_mode & 0o777 == 0o600  # application records: drkit's user only
    lines = [json.loads(line) for line in tail_file.read_text().splitlines()]
    import base64

    values = sorted(base64.b64decode(line["value_b64"]).decode() for line in lines)
    assert values == sorted(f"{p}-{i}" for p in range(PARTITIONS) for i in range(200, 230)
                            if (p, i) != (0, 200))  # fmt: skip
    assert {line["offset"] for line in lines} == set(range(200, 230))
    assert run["result"]["pointer"] == setup.source
    # What applications wrote on dc2 during the outage reached dc1 before the switch back.
    backward = FlowTopology.of(setup.config.flows[1])
    copied = _all_values(setup.source_endpoint, backward.target_topic(topic))
    assert sorted(copied) == sorted(
        f"{p}-{i}".encode() for p in range(PARTITIONS) for i in range(20)
    )


def _flows(setup: FlowSetup) -> list[dict[str, Any]]:
    import yaml

    document: dict[str, Any] = yaml.safe_load(setup.path.read_text())
    flows: list[dict[str, Any]] = document["flows"]
    return flows


def test_a_tail_export_to_a_topic_cut_short_and_run_again_holds_each_record_once(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names
) -> None:
    """Failback's export to a topic once used a producer per record and, resumed after a cut,
    wrote the whole tail again: the operator replayed duplicates.  Now one stream, and each
    record's provenance header tells a second run what is there already."""
    from drkit.failover.steps.divergence import TAIL_HEADER, export_to_topic
    from drkit.kafka.io import consume_all, consume_ranges

    source, export = names.topic("orders"), names.topic("tail")
    dc1.admin().create_topics([TopicSpec(source, 2)])
    for p in range(2):
        produce_batch(dc1.endpoint, source,
                      [(b"k", f"{p}-{i}".encode()) for i in range(50)], partition=p,
                      headers=(("app", b"kept"),))  # fmt: skip
    ranges = {TopicPartition(source, p): (0, 50) for p in range(2)}

    def tail() -> Any:
        return consume_ranges(dc1.endpoint, ranges, 60.0)

    cut = [record for record, _ in zip(tail(), range(30), strict=False)]  # cut after 30
    assert export_to_topic(dc2.endpoint, dc2.admin(), export, dc1.name, cut) == 30
    assert export_to_topic(dc2.endpoint, dc2.admin(), export, dc1.name, tail()) == 70
    assert export_to_topic(dc2.endpoint, dc2.admin(), export, dc1.name, tail()) == 0
    held = consume_all(dc2.endpoint, export, expected=100, timeout_s=60, complete=True)
    assert sorted((r.value or b"").decode() for r in held) == sorted(
        f"{p}-{i}" for p in range(2) for i in range(50)
    )
    for record in held:
        headers = dict(record.headers)
        assert headers["app"] == b"kept"
        assert (headers[TAIL_HEADER] or b"").decode().startswith(f"{dc1.name}/{source}/")


def test_a_tail_export_never_appends_to_a_topic_that_is_not_an_export(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names
) -> None:
    """``--export-topic dc2:payments`` (a typo, a look-alike of the export's name) named an
    application's topic: on main the tail was appended to it.  Now a topic with more than one
    partition, or with one record lacking the provenance header, is refused - nothing written."""
    from drkit.failover.context import StepFailed
    from drkit.failover.steps.divergence import export_to_topic
    from drkit.kafka.io import consume_ranges

    source, wide, narrow = names.topic("orders"), names.topic("payments"), names.topic("audit")
    dc1.admin().create_topics([TopicSpec(source, 1)])
    produce_batch(dc1.endpoint, source, [(b"k", f"tail-{i}".encode()) for i in range(5)])
    dc2.admin().create_topics([TopicSpec(wide, 3), TopicSpec(narrow, 1)])
    produce_batch(dc2.endpoint, narrow, [(b"app", b"an application's record")], partition=0)
    tail = TopicPartition(source, 0)
    for topic, why in ((wide, "it has 3 partitions"), (narrow, "at offset 0 has no")):
        ends = dc2.admin().topic_offsets(topic)
        with pytest.raises(StepFailed, match=why) as refused:
            export_to_topic(dc2.endpoint, dc2.admin(), topic, dc1.name,
                            consume_ranges(dc1.endpoint, {tail: (0, 5)}, 60.0))  # fmt: skip
        assert f"--export-topic {topic}: not a divergent-tail export topic" in str(refused.value)
        assert dc2.admin().topic_offsets(topic) == ends  # nothing appended


def test_a_vetoed_switchover_rolls_back_and_the_source_takes_writes_again(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    from drkit.control import ControlRepository, DesiredState

    setup, _groups = replicated_setup(dc1, dc2, names, tmp_path)
    topic = setup.config.flows[0].topics.include[0]
    veto = {"when": "before", "step": "move_pointer", "command": ["sh", "-c", "echo no; exit 3"]}
    with_config(setup, failover={"hooks": [veto]})
    source = invariants.Cluster(setup.source, setup.config.clusters[setup.source]
                                .bootstrap_servers)  # fmt: skip
    with History(f"sqlite:///{tmp_path / 'drkit.db'}", source, topic) as history:
        done = drkit(setup, "switchover", "--from", setup.source, "--to", setup.target,
                     "--yes", "-o", "json")  # fmt: skip
        wait_until(lambda: history.samples and not history.samples[-1].source_fenced, 10,
                   what="dc1 open again, sampled")  # fmt: skip
    assert done.code == 7, done.err  # vetoed
    # While it ran, sampled every 0.1 s: the pointer never left dc1 (its fence came and went).
    assert set(history.moves()) <= {None, setup.source}, history.moves()
    assert len(history.samples) >= 3 and not history.errors, (history.samples, history.errors)
    [run] = drkit(setup, "failover", "list", "-o", "json").json()["runs"]
    assert run["state"] == "rolled_back"
    states = {s["name"]: s["state"] for s in run["steps"]}
    assert states["fence_source"] == "rolled_back"
    assert states["stop_replication"] == "rolled_back"
    assert states["move_pointer"] == "failed"
    assert states["unfence_source"] == "done" and states["restart_replication"] == "done"
    assert topic not in dc1.admin().write_denied()
    assert produce_batch(setup.source_endpoint, topic, [(None, b"after")], partition=0) == 1
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    flow = setup.config.flows[0].name
    assert ControlRepository(store).directive(flow).desired is DesiredState.RUNNING
    status = drkit(setup, "status", "--no-probe", "-o", "json").json()
    assert status["active_cluster"] == setup.source and status["pointer"] is None
