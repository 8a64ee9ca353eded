"""The failover engine under faults, Jepsen style: real brokers, real ``drkit`` processes,
faults injected from outside (SIGSTOP/SIGCONT, kill -9, a clock 40 s ahead), and one
independent checker (tests/invariants.py) run after every case:

* once fenced, at most one cluster accepts application writes (after a rollback: the source);
* the pointer matches the last succeeded run;
* every record the source acknowledged before the fence is on the target;
* no group's committed offset on the target moved backwards;
* the audit trail agrees with the clusters' ACLs.

The same logic over in-memory clusters, case by case, is tests/unit/test_failover_safety.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import text

from drkit.failover.model import RunState, StepName, StepState
from drkit.failover.pointer import PointerRepository
from drkit.failover.runs import RunRecord, RunRepository
from drkit.kafka import KafkaAdmin
from drkit.records import TopicPartition
from drkit.store import StateStore
from drkit.topology.flow import FlowTopology
from tests import invariants
from tests.conftest import Names
from tests.failover_support import (
    PARTITIONS,
    PER_PARTITION,
    assert_groups_resume_exactly,
    drkit,
    fill,
    replicated_setup,
    with_config,
)
from tests.history import History
from tests.kafka_backends import ClusterUnderTest
from tests.optional_tools import tool
from tests.processes import is_stopped
from tests.replication_support import DrkitProcess, FlowSetup, Replicator, wait_until
from tests.tcp_proxy import database_behind_proxy

_STORES: dict[str, StateStore] = {}


def _store(setup: FlowSetup) -> StateStore:
    """The store the setup's config file names now (a case may have moved it to PostgreSQL)."""
    url = _store_url(setup)
    if url not in _STORES:
        _STORES[url] = StateStore(url)
        _STORES[url].ensure_current()
    return _STORES[url]


def _store_url(setup: FlowSetup) -> str:
    document = yaml.safe_load(setup.path.read_text())
    url = (document.get("state_store") or {}).get("url") or setup.config.state_store.url
    assert url is not None
    return url if isinstance(url, str) else url.get_secret_value()


def _engine(setup: FlowSetup, tmp_path: Path, *args: str) -> DrkitProcess:
    """A ``drkit`` engine command as a child process (its own process group)."""
    state = setup.path.parent / "state"
    command = ["--state-dir", str(state), *args, "--config", str(setup.path)]
    return DrkitProcess(command, tmp_path, "engine").start()


def _only_run(setup: FlowSetup) -> RunRecord:
    [run] = RunRepository(_store(setup)).latest()
    return run


def _step_state(setup: FlowSetup, step: StepName) -> StepState | None:
    runs = RunRepository(_store(setup)).latest(1)
    found = runs[0].step(step) if runs else None
    return found.state if found is not None else None


def _case(setup: FlowSetup, topic: str, store_url: str) -> invariants.Case:
    from drkit.topology.flow import FlowTopology

    clusters = setup.config.clusters
    return invariants.Case(
        source=invariants.Cluster(setup.source, clusters[setup.source].bootstrap_servers),
        target=invariants.Cluster(setup.target, clusters[setup.target].bootstrap_servers),
        topic=topic,
        replica=FlowTopology.of(setup.config.flows[0]).target_topic(topic),
        partitions=PARTITIONS,
        store_url=store_url,
    )  # fmt: skip


def _fence_point(run: RunRecord) -> dict[int, int]:
    point: dict[str, int] = run.detail(StepName.RECORD_FENCE_POINT).get("fence_point", {})
    return {int(key.rsplit(":", 1)[1]): end for key, end in point.items()}


def _tables(store: StateStore) -> Any:
    with store.session() as session:
        return {
            table: session.execute(text(f"SELECT * FROM {table} ORDER BY 1")).all()
            for table in ("failover_runs", "failover_steps", "flow_control", "active_pointer",
                          "fences", "leases")
        }  # fmt: skip


# -- a paused engine that wakes after another took over --------------------------------------


def test_a_switchover_frozen_in_drain_wakes_after_a_takeover_and_changes_nothing(
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
    fresh_pg_database: str,
) -> None:
    """SIGSTOP the engine in drain; let its lease and its drain timeout pass; another engine
    resumes the run and completes the switchover; SIGCONT.  The woken engine's drain has timed
    out - on main it rolled the move back (dc1 writable again, pointer on dc2: two primaries).
    It must exit 5 naming the holder, and change nothing."""
    setup, _groups = replicated_setup(dc1, dc2, names, tmp_path)
    topic = names.topic("orders")
    # PostgreSQL: a process frozen inside a SQLite write transaction holds the database's one
    # write lock until it wakes (docs/failover-safety.md); PostgreSQL ends such a transaction.
    with_config(setup, state_store={"url": fresh_pg_database},
                failover={"lease_ttl_s": 3.0, "switchover_timeout_s": 10.0,
                          "worker_silence_s": 10.0})  # fmt: skip
    fill(setup.source_endpoint, topic, 200, start=400)  # the drain has something to wait for
    frozen = _engine(setup, tmp_path, "switchover", "--from", setup.source, "--to",
                     setup.target, "--yes", "-o", "json")  # fmt: skip
    wait_until(lambda: _step_state(setup, StepName.DRAIN) is StepState.RUNNING, 90, 0.2,
               "the engine draining (no worker runs: it waits)")  # fmt: skip
    assert frozen.process is not None
    os.killpg(frozen.process.pid, signal.SIGSTOP)
    try:
        time.sleep(11)  # past its lease (3 s) and its drain timeout (10 s)
        run = _only_run(setup)
        with Replicator(setup, log_dir=tmp_path):
            resumed = drkit(setup, "failover", "--resume", str(run.id), "--yes", "-o", "json",
                            timeout_s=180)  # fmt: skip
        assert resumed.code == 0, resumed.err + resumed.out
        assert resumed.json()["state"] == "succeeded"
        after_takeover = _tables(_store(setup))
    finally:
        os.killpg(frozen.process.pid, signal.SIGCONT)
    code = frozen.wait(60)
    assert code == 5, frozen.log()[-3000:]
    assert "was taken over" in frozen.log() and "This process stopped" in frozen.log()
    # The store is exactly as the engine that took over left it (lease bookkeeping aside).
    now = _tables(_store(setup))
    for table in ("failover_runs", "failover_steps", "flow_control", "active_pointer", "fences"):
        assert now[table] == after_takeover[table], table
    final = _only_run(setup)
    assert final.state is RunState.SUCCEEDED
    problems = invariants.check(_case(setup, topic, _store_url(setup)), _fence_point(final))
    assert problems == []


def _maintenance(setup: FlowSetup) -> dict[str, Any]:
    """The monitor's maintenance duty (resume runs whose engine's lease lapsed), as a child."""
    state = str(setup.path.parent / "state")
    done = subprocess.run(
        [sys.executable, "-c", _MAINTENANCE, str(setup.path), state],
        capture_output=True, text=True, timeout=180, check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _many_groups(
    setup: FlowSetup, topic: str, names: Names, count: int
) -> dict[str, dict[TopicPartition, int]]:
    """``count`` more groups of the flow committed on the source, each partition at its own
    offset; {group: {TopicPartition: offset}}."""
    wanted = {
        names.group(f"bulk-{i:04d}"): {
            TopicPartition(topic, p): (i * 7 + p * 13) % (PER_PARTITION + 1)
            for p in range(PARTITIONS)
        }
        for i in range(count)
    }
    refused = KafkaAdmin(setup.source_endpoint).alter_groups_offsets(wanted)
    assert not any(refused.values()), refused
    return wanted


@pytest.mark.parametrize(
    ("step", "taker", "extra_groups"),
    [
        ("fence_source", "monitor", 0),
        ("translate_offsets", "engine", 0),
        ("commit_group_offsets", "monitor", 1000),  # at scale: 1,004 groups to write
        ("move_pointer", "engine", 0),
        ("start_reverse_flow", "monitor", 0),
    ],
)
def test_an_engine_frozen_before_a_step_wakes_after_a_takeover_and_changes_nothing(
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
    step: str,
    taker: str,
    extra_groups: int,
    fresh_pg_database: str,
) -> None:
    """The engine stops itself (a before-hook sends SIGSTOP to it) as it reaches ``step``; its
    lease lapses; the monitor's maintenance or a second engine (``--resume``) finishes the
    switchover (waiting, if the engine froze inside a store transaction, for PostgreSQL to end
    it); SIGCONT.  The woken engine must exit 5 and write nothing - the store exactly
    as the taker left it - and the invariants hold.  With ``extra_groups``, every one of
    them is on the target exactly where it stood on the source (the replica has the source's
    offsets: it was copied from the first record)."""
    setup, groups = replicated_setup(dc1, dc2, names, tmp_path)
    topic = names.topic("orders")
    groups.update(_many_groups(setup, topic, names, extra_groups))
    freeze = {"when": "before", "step": step, "command": ["sh", "-c", "kill -STOP $PPID"]}
    with_config(setup, state_store={"url": fresh_pg_database},  # see the drain case
                failover={"lease_ttl_s": 3.0, "hooks": [freeze]})  # fmt: skip
    frozen = _engine(setup, tmp_path, "switchover", "--from", setup.source, "--to",
                     setup.target, "--yes")  # fmt: skip
    assert frozen.process is not None
    pid = frozen.process.pid
    wait_until(lambda: is_stopped(pid), 120, 0.2, f"the engine stopped before {step}")
    try:
        with_config(setup, failover={"lease_ttl_s": 3.0, "hooks": []})
        time.sleep(3.5)  # its lease lapses
        run = _only_run(setup)
        with Replicator(setup, log_dir=tmp_path):
            if taker == "monitor":
                assert _maintenance(setup) == {"resumed": [run.id]}
            else:
                resumed = drkit(setup, "failover", "--resume", str(run.id), "--yes",
                                timeout_s=180)  # fmt: skip
                assert resumed.code == 0, resumed.err + resumed.out
        taken = _only_run(setup)  # should it not have succeeded: why it ended
        assert taken.state is RunState.SUCCEEDED, (taken.result, [
            (s.name.value, s.state.value, s.detail) for s in taken.steps
            if s.state is not StepState.DONE
        ])  # fmt: skip
        after_takeover = _tables(_store(setup))
    finally:
        os.killpg(pid, signal.SIGCONT)
    code = frozen.wait(60)
    assert code == 5, frozen.log()[-3000:]
    now = _tables(_store(setup))
    for table in ("failover_runs", "failover_steps", "flow_control", "active_pointer", "fences"):
        assert now[table] == after_takeover[table], table
    final = _only_run(setup)
    problems = invariants.check(_case(setup, topic, _store_url(setup)), _fence_point(final))
    assert problems == []
    if extra_groups:
        replica = _case(setup, topic, "").replica
        expected = {
            group: {TopicPartition(replica, tp.partition): o for tp, o in offsets.items()}
            for group, offsets in groups.items()
        }
        on_target = KafkaAdmin(setup.target_endpoint).groups_offsets(sorted(groups))
        found = {group: dict(offsets.offsets) for group, offsets in on_target.items()}
        wrong = sorted(group for group in expected if found.get(group) != expected[group])
        assert not wrong, f"{len(wrong)} of {len(groups)} groups not exact, e.g. {wrong[:3]}"


def test_an_engine_frozen_right_after_confirming_its_lease_sends_no_commit_when_woken(
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine confirms its lease for the group-offset commits and stops right there
    (failpoint ``commit_group_offsets.after_confirm=stop``), before sending them.  Its lease
    lapses; a second engine resumes the run and commits; an application then reads on at the
    target and commits a later position.  SIGCONT: the woken engine must send nothing - the
    budget its confirmation gave ends with the lease - or its old commit would set the group
    back on the new primary.  It exits 5 (lease lost) and the store is as the taker left it."""
    setup, groups = replicated_setup(dc1, dc2, names, tmp_path)
    topic = names.topic("orders")
    replica = FlowTopology.of(setup.config.flows[0]).target_topic(topic)
    with_config(setup, failover={"lease_ttl_s": 3.0})
    monkeypatch.setenv("DRKIT_FAILPOINTS", "commit_group_offsets.after_confirm=stop")
    frozen = _engine(setup, tmp_path, "switchover", "--from", setup.source, "--to",
                     setup.target, "--yes")  # fmt: skip
    monkeypatch.delenv("DRKIT_FAILPOINTS")
    assert frozen.process is not None
    pid = frozen.process.pid
    moved_on = {TopicPartition(replica, p): PER_PARTITION for p in range(PARTITIONS)}
    try:
        wait_until(lambda: is_stopped(pid), 120, 0.2, "the engine stopped after its confirm")
        time.sleep(3.5)  # its lease lapses
        run = _only_run(setup)
        with Replicator(setup, log_dir=tmp_path):
            resumed = drkit(setup, "failover", "--resume", str(run.id), "--yes", timeout_s=180)
        assert resumed.code == 0, resumed.err + resumed.out
        after_takeover = _tables(_store(setup))
        # The applications run on the new primary: every group reads to the end and commits.
        target = KafkaAdmin(setup.target_endpoint)
        for group in groups:
            target.alter_group_offsets(group, moved_on)
    finally:
        os.killpg(pid, signal.SIGCONT)
    code = frozen.wait(60)
    assert code == 5, frozen.log()[-3000:]
    on_target = KafkaAdmin(setup.target_endpoint).groups_offsets(sorted(groups))
    set_back = {g: dict(o.offsets) for g, o in on_target.items() if dict(o.offsets) != moved_on}
    assert set_back == {}, "the woken engine's commit set groups back on the new primary"
    log = frozen.log()
    assert "not sent - the lease that allowed it may have lapsed" in log, log[-3000:]
    now = _tables(_store(setup))
    for table in ("failover_runs", "failover_steps", "flow_control", "active_pointer", "fences"):
        assert now[table] == after_takeover[table], table


# -- a crash in the middle of a rollback -------------------------------------------------------


def test_a_rollback_killed_half_way_resumes_as_a_rollback_and_plan_resumes_nothing(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """A switchover vetoed at drain rolls back; kill -9 as it starts to unfence dc1.  Then:
    ``--plan`` changes nothing (on main it resumed the run, forward); a new switchover is
    refused naming the unfinished run; ``--resume`` continues the rollback - never the move -
    and dc1 takes writes again."""
    setup, _groups = replicated_setup(dc1, dc2, names, tmp_path)
    topic = names.topic("orders")
    veto = {"when": "before", "step": "drain", "command": ["sh", "-c", "exit 3"]}
    crash = {"when": "before", "step": "unfence_source", "command": ["sh", "-c", "kill -9 $PPID"]}
    with_config(setup, failover={"lease_ttl_s": 2.0, "hooks": [veto, crash]})
    killed = drkit(setup, "switchover", "--from", setup.source, "--to", setup.target, "--yes")
    assert killed.code == -9, killed.err
    run = _only_run(setup)
    assert run.state is RunState.ROLLING_BACK
    with_config(setup, failover={"lease_ttl_s": 2.0, "hooks": []})
    time.sleep(2.5)  # the dead engine's lease lapses

    store = _store(setup)
    before = _tables(store)
    planned = drkit(setup, "failover", "--from", setup.source, "--to", setup.target, "--plan",
                    "-o", "json")  # fmt: skip
    assert planned.code == 4, planned.err  # blocked: the code a run would end with
    blockers = {b["code"] for b in planned.json()["blockers"]}
    assert "unfinished_run" in blockers
    assert _tables(store) == before, "--plan changed the store"
    refused = drkit(setup, "switchover", "--from", setup.source, "--to", setup.target, "--yes")
    assert refused.code == 4 and f"--resume {run.id}" in refused.err, refused.err
    assert _tables(store) == before

    resumed = drkit(setup, "failover", "--resume", str(run.id), "--yes", "-o", "json")
    assert resumed.code == 6, resumed.err  # rolled back
    final = _only_run(setup)
    assert final.state is RunState.ROLLED_BACK
    drain = final.step(StepName.DRAIN)
    assert drain is not None and drain.state is StepState.FAILED  # never re-run forward
    problems = invariants.check(_case(setup, topic, _store_url(setup)), None)
    assert problems == []


# -- a fence that half-applied ------------------------------------------------------------------

_FAILPOINT = "DRKIT_FAILPOINTS"


def _source(setup: FlowSetup) -> invariants.Cluster:
    return invariants.Cluster(setup.source, setup.config.clusters[setup.source].bootstrap_servers)


def _acls_on(setup: FlowSetup, topic: str) -> set[tuple[str, str]]:
    """The fence principal's ACLs on ``topic`` of the source (the clusters are shared)."""
    found = invariants.principal_acls(_source(setup))
    return {(operation, permission) for name, operation, permission in found if name == topic}


def _fence_rows(setup: FlowSetup) -> set[tuple[str, str, bool]]:
    with _store(setup).session() as session:
        rows = session.execute(text("SELECT topic, state, reads_allowed FROM fences")).all()
    return {(str(r[0]), str(r[1]), bool(r[2])) for r in rows}


def test_a_fence_that_fails_after_its_acls_exist_is_undone_by_the_rollback(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """fence_source creates its DENY WRITE and companion ALLOW ACLs on dc1, then fails before it
    records them - as a timeout waiting to see them would (failpoint ``error``).  On main the
    rollback skipped the failed step: dc1 stayed fenced while the run said it was primary
    again.  The rollback must lift both: dc1 takes writes, no ACL of drkit's is left."""
    setup, _groups = replicated_setup(dc1, dc2, names, tmp_path)
    topic = names.topic("orders")
    failed = drkit(setup, "switchover", "--from", setup.source, "--to", setup.target, "--yes",
                   env={_FAILPOINT: "reconcile.after_acls=error"})  # fmt: skip
    assert failed.code == 6, failed.err  # rolled back
    assert "failpoint reconcile.after_acls fired" in failed.err + failed.out
    run = _only_run(setup)
    assert run.state is RunState.ROLLED_BACK
    fence = run.step(StepName.FENCE_SOURCE)
    assert fence is not None and fence.state is StepState.ROLLED_BACK  # the failed step undone
    assert _acls_on(setup, topic) == set()
    assert {(t, state) for t, state, _ in _fence_rows(setup)} == {(topic, "lifted")}
    problems = invariants.check(_case(setup, topic, _store_url(setup)), None)
    assert problems == []


def test_a_fence_killed_after_its_acls_exist_resumes_with_its_companions(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """kill -9 the engine right after fence_source created its ACLs on dc1 (failpoint
    ``kill``).  The store holds the intent (applying, companions decided) and dc1 the ACLs.
    --resume re-applies the fence: the topic no longer looks bare, and on main the second
    attempt forgot the companion ALLOWs, so lifting it left dc1 refusing writes.  A veto at
    drain rolls the resumed run back: dc1 must take writes again, no ACL of drkit's left."""
    setup, _groups = replicated_setup(dc1, dc2, names, tmp_path)
    topic = names.topic("orders")
    with_config(setup, failover={"lease_ttl_s": 2.0})
    killed = drkit(setup, "switchover", "--from", setup.source, "--to", setup.target, "--yes",
                   env={_FAILPOINT: "reconcile.after_acls=kill"})  # fmt: skip
    assert killed.code == -9, killed.err
    run = _only_run(setup)
    assert run.state is RunState.RUNNING
    assert _step_state(setup, StepName.FENCE_SOURCE) is StepState.RUNNING
    assert _fence_rows(setup) == {(topic, "applying", True)}  # the intent, companions decided
    on_dc1 = _acls_on(setup, topic)
    assert ("WRITE", "DENY") in on_dc1 and ("READ", "ALLOW") in on_dc1

    veto = {"when": "before", "step": "drain", "command": ["sh", "-c", "exit 3"]}
    with_config(setup, failover={"lease_ttl_s": 2.0, "hooks": [veto]})
    time.sleep(2.5)  # the dead engine's lease lapses
    resumed = drkit(setup, "failover", "--resume", str(run.id), "--yes", "-o", "json")
    assert resumed.code == 7, resumed.err  # fenced again, vetoed at drain (7), rolled back
    final = _only_run(setup)
    assert final.state is RunState.ROLLED_BACK
    fence = final.step(StepName.FENCE_SOURCE)
    assert "step=fence_source state=done" in resumed.err  # re-applied on resume ...
    assert fence is not None and fence.state is StepState.ROLLED_BACK  # ... and undone
    assert _acls_on(setup, topic) == set()
    problems = invariants.check(_case(setup, topic, _store_url(setup)), None)
    assert problems == []


# -- a pointer that moved in a step that did not finish ----------------------------------------


@pytest.mark.parametrize("action", ["kill", "error"])
def test_a_switchover_cut_off_right_after_its_pointer_moved_goes_forward_only(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path, action: str
) -> None:
    """move_pointer wrote the pointer (on dc2, by this run), then the engine died (``kill``) or
    the step failed (``error``) before recording it.  The applications are being sent to dc2:
    a rollback would unfence dc1 beside it, and abandoning the run would leave the move without
    its last steps (CI's engine-killed-mid-failover drill was abandoned exactly so).  The run
    may only go on: --resume finishes it, dc1 stays fenced, the invariants hold."""
    setup, groups = replicated_setup(dc1, dc2, names, tmp_path)
    topic = names.topic("orders")
    with_config(setup, failover={"lease_ttl_s": 2.0})
    source = invariants.Cluster(setup.source, setup.config.clusters[setup.source]
                                .bootstrap_servers)  # fmt: skip
    with Replicator(setup, log_dir=tmp_path), History(_store_url(setup), source, topic) as seen:
        armed = {_FAILPOINT: f"move_pointer.after_move={action}"}
        cut = drkit(setup, "switchover", "--from", setup.source, "--to", setup.target, "--yes",
                    env=armed, timeout_s=180)  # fmt: skip
        run = _only_run(setup)
        if action == "kill":
            assert cut.code == -9, cut.err
            assert run.state is RunState.RUNNING
            time.sleep(2.5)  # the dead engine's lease lapses
        else:
            assert cut.code == 1, cut.err  # stopped FAILED, not rolled back (6)
            assert "no rollback" in cut.err and f"--resume {run.id}" in cut.err
            assert run.state is RunState.FAILED
        assert _step_state(setup, StepName.MOVE_POINTER) is not StepState.DONE
        pointer = PointerRepository(_store(setup)).get()
        assert pointer is not None and (pointer.cluster, pointer.run_id) == (setup.target, run.id)
        assert ("WRITE", "DENY") in _acls_on(setup, topic)  # dc1 still fenced
        resumed = drkit(setup, "failover", "--resume", str(run.id), "--yes", "-o", "json",
                        timeout_s=180)  # fmt: skip
        assert resumed.code == 0, resumed.err + resumed.out
    # Checked while it happened - the cut, the wait, the resume: never dc1 open with the
    # pointer on dc2.
    assert seen.violations(setup.target) == [] and not seen.errors, seen.samples
    assert seen.moves()[-1] == setup.target, seen.moves()
    final = _only_run(setup)
    assert final.state is RunState.SUCCEEDED, final.result
    assert ("WRITE", "DENY") in _acls_on(setup, topic)
    problems = invariants.check(_case(setup, topic, _store_url(setup)), None)
    assert problems == []
    assert_groups_resume_exactly(setup, FlowTopology.of(setup.config.flows[0]).target_topic(topic),
                                 groups)  # fmt: skip


def test_a_failover_resumed_after_its_groups_read_on_commits_a_fresh_translation(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path
) -> None:
    """A failover failed before its commit; the applications read on (and committed) on the
    source, which answers, before the operator resumed it.  The run translated once; writing
    that old translation would set the group back on the target - it re-reads what it had
    done.  The resumed commit translates the moved group again and writes where it stands."""
    setup, groups = replicated_setup(dc1, dc2, names, tmp_path)
    topic = names.topic("orders")
    with Replicator(setup, log_dir=tmp_path):
        cut = drkit(setup, "failover", "--from", setup.source, "--to", setup.target, "--yes",
                    env={_FAILPOINT: "commit_group_offsets.before_write=error"},
                    timeout_s=180)  # fmt: skip
        assert cut.code == 1, cut.err
        run = _only_run(setup)
        assert run.state is RunState.FAILED
        assert _step_state(setup, StepName.TRANSLATE_OFFSETS) is StepState.DONE
        # The application behind the "middle" group reads on to the end on the source.
        middle = next(g for g in groups if g.endswith("middle"))
        KafkaAdmin(setup.source_endpoint).alter_group_offsets(
            middle, {TopicPartition(topic, p): PER_PARTITION for p in range(PARTITIONS)}
        )
        groups[middle] = {TopicPartition(topic, p): PER_PARTITION for p in range(PARTITIONS)}
        resumed = drkit(setup, "failover", "--resume", str(run.id), "--yes", "-o", "json",
                        timeout_s=180)  # fmt: skip
        assert resumed.code == 0, resumed.err + resumed.out
    final = _only_run(setup)
    assert final.state is RunState.SUCCEEDED, final.result
    replica = FlowTopology.of(setup.config.flows[0]).target_topic(topic)
    assert_groups_resume_exactly(setup, replica, groups)
    assert final.result.translated_again_for == (middle,), final.result


# -- a transaction the fence cut ---------------------------------------------------------------


@pytest.mark.parametrize("ending", ["abort", "commit"])
def test_a_transaction_open_across_the_fence_ends_after_it_and_nothing_is_lost(
    dc1: ClusterUnderTest, dc2: ClusterUnderTest, names: Names, tmp_path: Path, ending: str
) -> None:
    """An application's transaction is open on dc1 when the fence lands; it ends after the fence
    point was recorded (its producer aborts, or commits what it wrote before the fence).  The
    coordinator's markers then take one offset per partition past the fence point.  They are no
    records: the switchover completes (on main confirm_fence counted them as writes that slipped
    past the fence and rolled the move back - a drill caught it), and a commit's records, all
    written before the fence, are on dc2.  While it waits, the drain names what holds it: a
    transaction still open on dc1, on every partition (its write pause is the producer's)."""
    from drkit.kafka.apps import AppProducer

    setup, _groups = replicated_setup(dc1, dc2, names, tmp_path)
    topic = names.topic("orders")
    app = AppProducer(setup.source_endpoint, topic, transactional=True, timeout_s=30.0)
    for partition in range(PARTITIONS):  # acknowledged on dc1: before any fence point
        app.open_transaction([(None, f"txn-{partition}".encode())], partition)
    with Replicator(setup, log_dir=tmp_path):
        engine = _engine(setup, tmp_path, "switchover", "--from", setup.source, "--to",
                         setup.target, "--yes")  # fmt: skip
        held = f"{PARTITIONS} held by a transaction still open on {setup.source}"
        wait_until(lambda: held in engine.log(), 120, 0.2, "the drain naming the transaction")
        app.end_transaction(commit=ending == "commit")
        code = engine.wait(180)
    app.close()
    assert code == 0, engine.log()[-3000:]
    final = _only_run(setup)
    assert final.state is RunState.SUCCEEDED
    assert final.detail(StepName.DRAIN)["open_transactions"] == [
        f"{topic}:{p}" for p in range(PARTITIONS)
    ]
    confirmed = final.detail(StepName.CONFIRM_FENCE)
    assert confirmed["markers_after_fence_point"] == PARTITIONS
    problems = invariants.check(_case(setup, topic, _store_url(setup)), _fence_point(final))
    assert problems == []
    case = _case(setup, topic, _store_url(setup))
    on_dc2 = invariants.values(
        case.target, case.replica, invariants.end_offsets(case.target, case.replica, PARTITIONS)
    )
    written = {f"txn-{p}".encode() for p in range(PARTITIONS)}
    assert (written <= set(on_dc2)) == (ending == "commit")


# -- the store cut off mid-run ------------------------------------------------------------------


def test_a_switchover_that_loses_the_store_mid_run_stops_then_resumes_to_the_same_end(
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
    fresh_pg_database: str,
) -> None:
    """The engine's link to PostgreSQL is cut while it drains.  It cannot confirm its lease, so
    it stops before its next change, naming the store; replication meanwhile goes on through
    the control channel.  Once the store is back, --resume finishes the run: one primary,
    nothing lost."""
    setup, _groups = replicated_setup(dc1, dc2, names, tmp_path)
    topic = names.topic("orders")
    direct = StateStore(fresh_pg_database)
    direct.upgrade()
    with database_behind_proxy(fresh_pg_database) as (link, via_link):
        with_config(setup, state_store={"url": via_link},
                    failover={"lease_ttl_s": 3.0, "switchover_timeout_s": 60.0,
                              "worker_silence_s": 10.0})  # fmt: skip
        fill(setup.source_endpoint, topic, 200, start=400)  # the drain waits for a worker
        engine = _engine(setup, tmp_path, "switchover", "--from", setup.source, "--to",
                         setup.target, "--yes")  # fmt: skip

        def draining() -> bool:
            runs = RunRepository(direct).latest(1)
            step = runs[0].step(StepName.DRAIN) if runs else None
            return step is not None and step.state is StepState.RUNNING

        wait_until(draining, 90, 0.2, "the engine draining")
        link.cut()
        with Replicator(setup, log_dir=tmp_path):  # replicates through the channel
            code = engine.wait(120)
            assert code != 0, engine.log()[-3000:]
            assert "could not be confirmed" in engine.log() or "state store" in engine.log()
            [run] = RunRepository(direct).latest()
            assert run.state is RunState.RUNNING  # stopped mid-run, nothing recorded half
            fenced_before = invariants.denied_topics(
                invariants.Cluster(setup.source, setup.config.clusters[setup.source]
                                   .bootstrap_servers)
            )  # fmt: skip
            assert topic in fenced_before  # still fenced: the source stays read-only
            link.heal()
            time.sleep(3.5)  # its lease lapses
            resumed = drkit(setup, "failover", "--resume", str(run.id), "--yes", "-o", "json",
                            timeout_s=180)  # fmt: skip
        assert resumed.code == 0, resumed.err + resumed.out
        final = RunRepository(direct).latest()[0]
        assert final.state is RunState.SUCCEEDED
        problems = invariants.check(_case(setup, topic, fresh_pg_database), _fence_point(final))
        assert problems == []
    direct.engine.dispose()


# -- clocks that disagree ----------------------------------------------------------------------


def _faketime() -> str:
    return tool("faketime", "FAKETIME", "apt install faketime to skew a process's clock")


def test_a_monitor_and_an_engine_whose_clocks_run_40s_ahead_never_take_over_a_live_run(
    dc1: ClusterUnderTest,
    dc2: ClusterUnderTest,
    names: Names,
    tmp_path: Path,
    fresh_pg_database: str,
) -> None:
    """A live engine holds the lease (it is in a slow hook); a second engine and a monitor's
    maintenance duty run with clocks 40 s ahead.  On main both saw the lease expired and took
    the run over.  Expiry is the database's call now: both must leave it alone.  (PostgreSQL:
    on SQLite every process reads its own host's clock, and libfaketime lies to one of them.)"""
    faketime = _faketime()
    setup, _groups = replicated_setup(dc1, dc2, names, tmp_path)
    slow = {"when": "before", "step": "stop_replication", "command": ["sleep", "12"]}
    with_config(setup, state_store={"url": fresh_pg_database},
                failover={"lease_ttl_s": 6.0, "hooks": [slow]})  # fmt: skip
    live = _engine(setup, tmp_path, "failover", "--from", setup.source, "--to", setup.target,
                   "--yes", "-o", "json")  # fmt: skip
    pg = StateStore(fresh_pg_database)
    pg.upgrade()
    wait_until(lambda: RunRepository(pg).latest(1) != [], 60, 0.2, "the live run")
    [run] = RunRepository(pg).latest()
    skew = [faketime, "-f", "+40s"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    state = str(setup.path.parent / "state")
    engine = subprocess.run(
        [*skew, sys.executable, "-m", "drkit", "--state-dir", state, "failover", "--resume",
         str(run.id), "--yes", "--config", str(setup.path)],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert engine.returncode == 5, engine.stderr
    assert "held by" in engine.stderr
    monitor = subprocess.run(
        [*skew, sys.executable, "-c", _MAINTENANCE, str(setup.path), state],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert monitor.returncode == 0, monitor.stderr
    assert json.loads(monitor.stdout.strip().splitlines()[-1]) == {"resumed": []}
    assert live.wait(120) == 0, live.log()[-3000:]
    [final] = RunRepository(pg).latest()
    assert final.state is RunState.SUCCEEDED
    # The lease was acquired once - by the live engine - in this fresh database: a takeover
    # would have raised the token.
    with pg.session() as session:
        tokens = session.execute(text("SELECT name, token FROM leases")).all()
    assert ("failover", 1) in [tuple(row) for row in tokens]
    problems = invariants.check(_case(setup, names.topic("orders"), fresh_pg_database), None)
    assert problems == []


_MAINTENANCE = """
import json, sys
from pathlib import Path
from drkit.config import load_config
from drkit.failover.maintenance import FailoverMaintenance
from drkit.kafka import KafkaAdmin
from drkit.store import StateStore
config = load_config(sys.argv[1])
store = StateStore(config.state_store.url.get_secret_value())
maintenance = FailoverMaintenance(config, store, Path(sys.argv[2]), connect=KafkaAdmin)
resumed = maintenance.resume_stale_runs()
print(json.dumps({"resumed": resumed}))
"""
