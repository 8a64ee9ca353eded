"""``drkit flows`` and ``drkit pointer show`` against a real SQLite store.

The control channel lives on a Kafka cluster; here publishing is replaced by a recorder (the
integration suite publishes to real brokers), everything else - the lease, the directive, the
refusals - is the real thing.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from drkit.cli import cli
from drkit.control import ControlRepository, DesiredState
from drkit.control.operator import FlowChangeFacts, FlowVerb, change_blockers
from drkit.failover.lease import LeaseRepository
from drkit.failover.pointer import PointerRepository
from drkit.store import StateStore

FORWARD, BACK = "dc1->dc2", "dc2->dc1"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, StateStore, list[str]]:
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
        "flows: [{source: dc1, target: dc2}, {source: dc2, target: dc1}]\n"
        f"state_store: {{url: 'sqlite:///{tmp_path / 'drkit.db'}'}}\n"
    )
    store = StateStore(f"sqlite:///{tmp_path / 'drkit.db'}")
    store.upgrade()
    published: list[str] = []

    def publish(_config: object, _store: object, flow: object, directive: object) -> str:
        published.append(f"{directive.flow} {directive.desired.value}")  # type: ignore[attr-defined]
        return "published"

    monkeypatch.setattr("drkit.cli.flows_cmd._publish", publish)
    return config, store, published


def drkit(config: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--config", str(config)])


def test_pause_writes_the_directive_with_who_and_why_and_publishes_it(
    setup: tuple[Path, StateStore, list[str]],
) -> None:
    config, store, published = setup
    paused = drkit(config, "flows", "pause", FORWARD, "-m", "broker maintenance", "--wait", "0")
    assert paused.exit_code == 0, paused.output
    directive = ControlRepository(store).directive(FORWARD)
    assert (directive.desired, directive.epoch) == (DesiredState.PAUSED, 1)
    assert directive.reason.startswith("cli:") and directive.reason.endswith("broker maintenance")
    assert published == [f"{FORWARD} paused"]
    listed = json.loads(drkit(config, "flows", "list", "-o", "json").output)
    assert listed["schema"] == "drkit.flows/v1"
    assert [(f["flow"], f["desired"], f["epoch"]) for f in listed["flows"]] == [
        (FORWARD, "paused", 1), (BACK, "running", 0)
    ]  # fmt: skip
    again = drkit(config, "flows", "pause", FORWARD, "-m", "again", "--wait", "0")
    assert again.exit_code == 0 and "already paused" in again.output
    assert ControlRepository(store).directive(FORWARD).epoch == 1  # nothing written
    resumed = drkit(config, "flows", "resume", FORWARD, "-m", "done", "--wait", "0")
    assert resumed.exit_code == 0, resumed.output
    assert ControlRepository(store).directive(FORWARD).desired is DesiredState.RUNNING


def test_a_verb_that_does_not_match_the_state_is_refused_naming_the_right_one(
    setup: tuple[Path, StateStore, list[str]],
) -> None:
    config, store, _published = setup
    assert drkit(config, "flows", "stop", FORWARD, "-m", "x", "--wait", "0").exit_code == 0
    wrong = drkit(config, "flows", "resume", FORWARD, "-m", "x", "--wait", "0")
    assert wrong.exit_code == 4 and "'drkit flows start'" in wrong.output
    assert ControlRepository(store).directive(FORWARD).desired is DesiredState.STOPPED


def test_the_old_direction_does_not_run_again_after_a_failover(
    setup: tuple[Path, StateStore, list[str]],
) -> None:
    """The pointer is on dc2: letting dc1->dc2 run would copy dc1's divergent tail onto dc2."""
    config, store, published = setup
    ControlRepository(store).set(FORWARD, DesiredState.STOPPED, "failover run 1", 1)
    PointerRepository(store).move("dc2", 1)
    refused = drkit(config, "flows", "start", FORWARD, "-m", "oops", "--wait", "0")
    assert refused.exit_code == 4, refused.output
    assert "drkit failback --to dc1" in refused.output and "Traceback" not in refused.output
    assert ControlRepository(store).directive(FORWARD).desired is DesiredState.STOPPED
    assert published == []
    shown = json.loads(drkit(config, "pointer", "show", "-o", "json").output)
    assert (shown["cluster"], shown["set"], shown["run"]) == ("dc2", True, 1)
    assert shown["updated_at"].endswith("Z")


def test_no_change_while_a_failover_holds_the_lease(
    setup: tuple[Path, StateStore, list[str]],
) -> None:
    config, store, published = setup
    LeaseRepository(store).acquire("engine:host:1:abcd", 60)
    held = drkit(config, "flows", "stop", FORWARD, "-m", "x", "--wait", "0")
    assert held.exit_code == 5, held.output
    assert "engine:host:1:abcd" in held.output
    assert ControlRepository(store).directive(FORWARD).epoch == 0 and published == []


def test_a_lease_left_by_a_command_that_ended_on_this_host_is_taken_at_once(
    setup: tuple[Path, StateStore, list[str]],
) -> None:
    """A flows command (or a re-point) killed while it held the lease leaves it for its TTL;
    the next one takes it at once - but never from a process still running."""
    config, store, published = setup
    gone = subprocess.Popen(["true"])
    gone.wait()
    host = socket.gethostname()
    LeaseRepository(store).acquire(f"cli-flows:{host}:{gone.pid}:dead", 60)
    stopped = drkit(config, "flows", "stop", FORWARD, "-m", "x", "--wait", "0")
    assert stopped.exit_code == 0, stopped.output
    assert ControlRepository(store).directive(FORWARD).desired is DesiredState.STOPPED
    assert published == [f"{FORWARD} stopped"]
    LeaseRepository(store).acquire(f"cli-flows:{host}:{os.getpid()}:live", 60)  # this process
    held = drkit(config, "flows", "start", FORWARD, "-m", "x", "--wait", "0")
    assert held.exit_code == 5 and f"{os.getpid()}:live" in held.output, held.output


def test_an_unknown_flow_is_bad_input(setup: tuple[Path, StateStore, list[str]]) -> None:
    config, _store, _published = setup
    unknown = drkit(config, "flows", "pause", "dc1->dc9", "-m", "x")
    assert unknown.exit_code == 2 and "no flow 'dc1->dc9'" in unknown.output
    assert "dc1->dc2" in unknown.output  # the flows there are


def test_pointer_show_before_any_failover(setup: tuple[Path, StateStore, list[str]]) -> None:
    config, _store, _published = setup
    shown = drkit(config, "pointer", "show")
    assert shown.exit_code == 0 and "not set (no failover yet): applications use dc1" in (
        shown.output
    )


def test_an_unfinished_run_owns_the_flows() -> None:
    facts = FlowChangeFacts(FORWARD, "dc1", DesiredState.RUNNING, "dc1", (7,))
    (blocker,) = change_blockers(FlowVerb.PAUSE, facts)
    assert "failover run 7 is unfinished" in blocker and "--resume 7" in blocker
    assert change_blockers(FlowVerb.PAUSE, FlowChangeFacts(FORWARD, "dc1", DesiredState.RUNNING,
                                                           "dc1")) == []  # fmt: skip


def test_a_hold_the_control_channel_did_not_get_fails_and_says_so(
    setup: tuple[Path, StateStore, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written in the store but not on the channel: workers cut off from the store would go on
    copying - the operator must hear it (exit 1), and running the command again publishes."""
    config, store, _published = setup
    monkeypatch.setattr(
        "drkit.cli.flows_cmd._publish", lambda *_a: "not published: dc2 did not answer"
    )
    failed = drkit(config, "flows", "stop", FORWARD, "-m", "x", "--wait", "0")
    assert failed.exit_code == 1, failed.output
    assert "not on its control channel on dc2" in failed.output
    assert ControlRepository(store).directive(FORWARD).desired is DesiredState.STOPPED
    monkeypatch.setattr("drkit.cli.flows_cmd._publish", lambda *_a: "published")
    again = drkit(config, "flows", "stop", FORWARD, "-m", "x", "--wait", "0")
    assert again.exit_code == 0 and "already stopped" in again.output
    assert "control channel on dc2: published" in again.output
    # A release the channel did not get fails alike (it exited 0 while pause exited 1).
    monkeypatch.setattr(
        "drkit.cli.flows_cmd._publish", lambda *_a: "not published: dc2 did not answer"
    )
    started = drkit(config, "flows", "start", FORWARD, "-m", "x", "--wait", "0")
    assert started.exit_code == 1, started.output
    assert "not on its control channel on dc2" in started.output and "stay held" in started.output
    assert ControlRepository(store).directive(FORWARD).desired is DesiredState.RUNNING


def test_fences_list_shows_what_is_in_place_and_with_all_what_was_lifted(
    setup: tuple[Path, StateStore, list[str]],
) -> None:
    from drkit.failover.fences import FenceRepository, FenceState

    config, store, _published = setup
    assert "no fences in place" in drkit(config, "fences", "list").output
    fences = FenceRepository(store)
    fences.record("dc1", ["orders", "payments"], FenceState.APPLIED, 3, reads_allowed=["orders"])
    fences.record("dc3", ["audit"], FenceState.PENDING, 4)
    fences.record("dc1", ["payments"], FenceState.LIFTED, 5)
    listed = json.loads(drkit(config, "fences", "list", "-o", "json").output)
    assert listed["schema"] == "drkit.fences/v1"
    assert [(f["cluster"], f["topic"], f["state"], f["run"], f["reads_allowed"])
            for f in listed["fences"]] == [
        ("dc1", "orders", "applied", 3, True), ("dc3", "audit", "pending", 4, False)
    ]  # fmt: skip
    text = drkit(config, "fences", "list", "--all").output.splitlines()
    assert [line.split()[:3] for line in text] == [
        ["dc1", "orders", "applied"], ["dc1", "payments", "lifted"], ["dc3", "audit", "pending"]
    ]  # fmt: skip


def test_lifting_a_topic_that_is_not_fenced_is_bad_input_saying_what_is(
    setup: tuple[Path, StateStore, list[str]],
) -> None:
    """W6 (issue 45): ``fences lift --topic`` naming a topic with no fence exited 4 ("the plan
    has a blocker") - nothing to lift is the argument's fault: exit 2, changing nothing."""
    from drkit.failover.fences import FenceRepository, FenceState

    config, store, _published = setup
    PointerRepository(store).move("dc1", None)
    fences = FenceRepository(store)
    fences.record("dc1", ["orders", "payments"], FenceState.APPLIED, 3)
    fences.record("dc1", ["payments"], FenceState.LIFTED, 5)
    for topic, says in [
        ("ghost", "--topic: not fenced on dc1: ghost (fenced there: orders)"),
        ("payments", "--topic: not fenced on dc1: payments (already lifted; fenced there: orders)"),
    ]:
        done = drkit(config, "fences", "lift", "--cluster", "dc1", "--topic", topic, "-m", "x")
        assert done.exit_code == 2, done.output
        assert says in done.output
    assert fences.fenced("dc1") == {"orders"}


def test_a_flow_that_ended_for_good_is_named_failed_with_its_error_in_list_and_status(
    setup: tuple[Path, StateStore, list[str]],
) -> None:
    """Issue 52: a worker's flow that ended for good left no trace (its ack row was dropped):
    `flows list` said "no worker has reported" and `status` nothing at all."""
    config, store, _published = setup
    control = ControlRepository(store)
    control.ack(BACK, "w1", 0, DesiredState.PAUSED, failure="dc2: subscribe: _INVALID_ARG")
    control.ack(FORWARD, "w1", 0, DesiredState.RUNNING)
    listed = drkit(config, "flows", "list")
    assert listed.exit_code == 0, listed.output
    back = listed.output.split(f"{BACK}:")[1]
    assert "FAILED" in back and "dc2: subscribe: _INVALID_ARG" in back
    as_json = json.loads(drkit(config, "flows", "list", "-o", "json").output)
    workers = {f["flow"]: f["workers"] for f in as_json["flows"]}
    assert workers[BACK][0]["failure"] == "dc2: subscribe: _INVALID_ARG"
    assert workers[FORWARD][0]["failure"] is None
    shown = drkit(config, "status", "--no-probe", "-o", "json")
    flows = json.loads(shown.output)["flows"]
    assert flows[BACK]["control"]["failed"] == {"w1": "dc2: subscribe: _INVALID_ARG"}
    assert flows[FORWARD]["control"] == {
        "desired": "running", "epoch": 0, "running": ["w1"], "failed": {},
    }  # fmt: skip
    text = drkit(config, "status", "--no-probe").output
    assert "FAILED on w1: dc2: subscribe: _INVALID_ARG" in text
    # A new directive nobody runs yet: the flow wants to run and no live worker runs it.
    control.set(FORWARD, DesiredState.RUNNING, "test")
    assert "NOT RUNNING" in drkit(config, "status", "--no-probe").output.split(BACK)[0]


def test_workers_whose_flow_ended_are_not_counted_as_acknowledging(
    setup: tuple[Path, StateStore, list[str]],
) -> None:
    """Trial 5, h08/h09: with no replicate running, `flows pause` said "workers: 3
    acknowledged" - three workers whose flow had ended FAILED minutes before."""
    config, store, _published = setup
    control = ControlRepository(store)
    for worker in ("w1", "w2", "w3"):
        control.ack(FORWARD, worker, 0, DesiredState.RUNNING, failure="create topic t: refused")
    for verb in ("pause", "resume"):
        done = drkit(config, "flows", verb, FORWARD, "-m", "x", "--wait", "1")
        assert done.exit_code == 0, done.output
        assert "workers: none live (3 ended: FAILED)" in done.output, done.output
        assert "acknowledged" not in done.output
        assert "the directive is stored and applies when its workers start" in done.output
    as_json = json.loads(drkit(config, "flows", "pause", FORWARD, "-m", "x", "-o", "json").output)
    assert as_json["workers"] == {
        "acknowledged": [], "not_yet": [], "silent": [], "ended": ["w1", "w2", "w3"],
    }  # fmt: skip
    # A live worker that acted on the directive is counted; the ended ones beside it are named.
    control.ack(FORWARD, "w4", 4, DesiredState.RUNNING)
    resumed = drkit(config, "flows", "resume", FORWARD, "-m", "x", "--wait", "1")
    assert "workers: 1 acknowledged, 3 ended: FAILED" in resumed.output, resumed.output
    assert "applies when" not in resumed.output


def test_pointer_key_prints_the_key_pointer_records_are_signed_with(
    setup: tuple[Path, StateStore, list[str]],
) -> None:
    from drkit.config import load_config
    from drkit.failover.pointer import pointer_key

    config, store, _published = setup
    shown = drkit(config, "pointer", "key")
    assert shown.exit_code == 0, shown.output
    assert bytes.fromhex(shown.output.strip()) == pointer_key(load_config(config), store)
    assert drkit(config, "pointer", "key").output == shown.output  # kept, not made anew
