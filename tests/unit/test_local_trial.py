"""What a new user's trial of ``drkit local ...`` found (issue 45): refusals that came after
brokers had started, exit 1 for bad input, messages claiming what did not happen, a purge that
left a directory, and a broker's death named by unrelated log lines.

No broker starts here: LocalKafka's process handling is replaced by a table of fake pids (the
state files, the messages and the decisions are drkit's own)."""

from __future__ import annotations

import json
import os
import signal
import socket
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from drkit.cli import cli
from drkit.errors import LocalClusterError
from drkit.kafka import KafkaAdmin
from drkit.local import cluster as cluster_module
from drkit.local.cluster import BrokerState, LocalClusterState, LocalKafka

BIND_FAILURE = "".join(
    line + "\n"
    for line in (
        "[01:00:00,001] INFO Registered kafka:type=kafka.Log4jController MBean (kafka.utils.Log4j)",
        "[01:00:00,200] INFO [ControllerServer id=1] Starting controller (kafka.server.Controller)",
        "[01:00:00,300] INFO [SocketServer nodeId=1] Created data-plane acceptor (kafka.network)",
        "[01:00:00,400] ERROR [ControllerServer id=1] Fatal error during controller startup. "
        "Prepare to shutdown (kafka.server.ControllerServer)",
        "org.apache.kafka.common.KafkaException: Socket server failed to bind to "
        "127.0.0.1:{port}: Address already in use.",
        "\tat kafka.network.Acceptor.openServerSocket(SocketServer.scala:734)",
        "Caused by: java.net.BindException: Address already in use",
        "\tat java.base/sun.nio.ch.Net.bind0(Native Method)",
        "[01:00:00,500] INFO [ControllerServer id=1] shutting down (kafka.server.ControllerServer)",
        "[01:00:00,600] INFO App info kafka.server for 1 unregistered (org.apache.kafka.common)",
        "[01:00:00,800] INFO Exiting Kafka. (kafka.Kafka$)",
    )
)


@dataclass
class FakeBrokers:
    """Which fake pids are "alive" and what was started; ``not_ready`` names clusters whose
    wait for readiness fails; ``dies`` maps a cluster to the server.log its broker leaves
    behind as it exits during start-up."""

    alive: set[int] = field(default_factory=set)
    started: list[tuple[str, int]] = field(default_factory=list)
    not_ready: set[str] = field(default_factory=set)
    dies: dict[str, str] = field(default_factory=dict)
    next_pid: int = 4_000_000


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeBrokers:
    brokers = FakeBrokers()
    monkeypatch.setattr(cluster_module, "resolve_bundle", lambda _name: tmp_path / "jars")
    monkeypatch.setattr(LocalKafka, "_format", lambda *_args: None)
    monkeypatch.setattr(cluster_module, "_pid_is_broker", lambda pid, _props: pid in brokers.alive)

    def spawn(self: LocalKafka, state: LocalClusterState, broker: BrokerState, _jars: Path) -> int:
        self._write_properties(state, broker)
        brokers.next_pid += 1
        pid = brokers.next_pid
        brokers.started.append((state.name, broker.node_id))
        if state.name in brokers.dies:  # appends, as log4j does across restarts
            log = self._broker_dir(state.name, broker.node_id) / "logs" / "server.log"
            with log.open("a") as out:
                out.write(brokers.dies[state.name].format(port=broker.controller_port))
        else:
            brokers.alive.add(pid)
        return pid

    def wait_ready(self: LocalKafka, state: LocalClusterState, _timeout_s: float) -> None:
        self._check_processes(state)
        if state.name in brokers.not_ready:
            raise LocalClusterError(f"cluster {state.name} did not become ready within 1s")

    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        if pid < 4_000_000:
            real_kill(pid, sig)
        elif sig in (signal.SIGTERM, signal.SIGKILL):
            brokers.alive.discard(pid)

    monkeypatch.setattr(LocalKafka, "_spawn", spawn)
    monkeypatch.setattr(LocalKafka, "_wait_ready", wait_ready)
    monkeypatch.setattr(os, "kill", kill)
    return brokers


def _run(state: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--state-dir", str(state), "local", *args])


# -- item 1: --timeout, and what a failed `up` leaves running -----------------------------------


def test_local_up_refuses_a_timeout_too_short_for_a_broker_before_starting_any(
    tmp_path: Path, fake: FakeBrokers
) -> None:
    for timeout in ("0", "-5", "2.5"):
        done = _run(tmp_path, "up", "--timeout", timeout)
        assert done.exit_code == 2, done.output
        assert "--timeout" in done.output and "at least 10" in done.output, done.output
    assert fake.started == [] and not (tmp_path / "local").exists()


def test_a_failed_local_up_stops_the_brokers_it_started_and_names_what_is_left(
    tmp_path: Path, fake: FakeBrokers
) -> None:
    fake.not_ready.add("dc2")
    done = _run(tmp_path, "up", "--timeout", "10")
    assert done.exit_code == 1, done.output
    assert "dc2 did not become ready" in done.output, done.output
    assert "stopped what this run started: dc1, dc2" in done.output, done.output
    assert fake.alive == set(), "brokers were left running"
    # dc1 running before the run: it is left running, and the message says so and how to stop.
    fake.not_ready.clear()
    assert _run(tmp_path, "up", "--clusters", "dc1", "--timeout", "10").exit_code == 0
    fake.not_ready.add("dc2")
    done = _run(tmp_path, "up", "--timeout", "10")
    assert done.exit_code == 1, done.output
    assert "stopped what this run started: dc2" in done.output, done.output
    assert "left running: dc1 (running before); 'drkit local down' stops it" in done.output
    assert len(fake.alive) == 1


def test_local_up_failing_after_its_brokers_are_ready_names_the_clusters_left_running(
    tmp_path: Path, fake: FakeBrokers, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drkit.local.registry import LocalRegistries

    def no_registry(*_args: object) -> None:
        raise LocalClusterError("the schema registry did not start")

    monkeypatch.setattr(LocalRegistries, "up", no_registry)
    done = _run(tmp_path, "up", "--schema-registry")
    assert done.exit_code == 1, done.output
    assert "the schema registry did not start" in done.output
    assert "left running: dc1, dc2; 'drkit local down' stops them" in done.output, done.output


# -- item 2: cluster names ------------------------------------------------------------------------


def test_local_up_refuses_a_cluster_name_no_config_could_hold_before_starting_anything(
    tmp_path: Path, fake: FakeBrokers
) -> None:
    for names, shown in (("dc☃,dc2", "dc☃"), ("dc1,../x", "../x"), ("a" * 65 + ",dc2", "65")):
        done = _run(tmp_path, "up", "--clusters", names)
        assert done.exit_code == 2, done.output
        assert "--clusters" in done.output and shown in done.output, done.output
    assert "letters, digits, _ and -" in done.output or "at most 64" in done.output
    assert fake.started == [] and not (tmp_path / "local").exists()


def test_properties_written_for_java_carry_non_ascii_paths_escaped(tmp_path: Path) -> None:
    """Java reads a .properties file as ISO-8859-1: a UTF-8 state directory's name came out
    garbled, and the broker wrote its data to a directory nobody knew of."""
    manager = LocalKafka(tmp_path / "état", connect=KafkaAdmin)
    state = LocalClusterState("dc1", "id", [BrokerState(1, 1, 2)])
    manager._write_properties(state, state.brokers[0])
    raw = (tmp_path / "état" / "local" / "dc1" / "broker-1" / "server.properties").read_bytes()
    assert raw.isascii() and b"\\u00e9tat" in raw


# -- item 3: broker ids ---------------------------------------------------------------------------


def test_a_broker_id_the_cluster_does_not_have_is_bad_input_naming_the_ones_it_has(
    tmp_path: Path, fake: FakeBrokers
) -> None:
    assert _run(tmp_path, "up", "--clusters", "dc1", "--brokers", "3").exit_code == 0
    fake.started.clear()
    for verb, broker in (("kill", "7"), ("kill", "-1"), ("stop", "9"), ("start", "4")):
        done = _run(tmp_path, verb, "dc1", "--broker", broker)
        assert done.exit_code == 2, (verb, broker, done.output)
        assert f"no broker {broker} (brokers: 1, 2, 3)" in done.output, done.output
    assert len(fake.alive) == 3 and fake.started == []


# -- item 4: messages say what was done -----------------------------------------------------------


def test_stop_kill_start_and_down_say_what_they_did_not_what_was_asked(
    tmp_path: Path, fake: FakeBrokers
) -> None:
    assert _run(tmp_path, "up", "--brokers", "2").exit_code == 0
    done = _run(tmp_path, "kill", "dc1", "--broker", "1")
    assert done.exit_code == 0 and "dc1: broker 1 killed" in done.output, done.output
    done = _run(tmp_path, "kill", "dc1", "--broker", "1")
    assert done.exit_code == 0 and "dc1: broker 1 was not running" in done.output, done.output
    done = _run(tmp_path, "kill", "dc1")
    assert done.exit_code == 0, done.output
    assert "dc1: broker 2 killed; broker 1 was not running" in done.output, done.output
    done = _run(tmp_path, "kill", "dc1")
    assert "dc1: no broker was running" in done.output and "killed" not in done.output
    done = _run(tmp_path, "start", "dc1", "--broker", "2")
    assert "dc1: broker 2 started" in done.output, done.output
    done = _run(tmp_path, "start", "dc1")
    assert "dc1: broker 1 started; broker 2 already running" in done.output, done.output
    done = _run(tmp_path, "start", "dc1")
    assert "dc1: already running (every broker)" in done.output, done.output
    done = _run(tmp_path, "stop", "dc2")
    assert "dc2: all brokers stopped (1, 2)" in done.output, done.output
    done = _run(tmp_path, "down")
    assert done.exit_code == 0, done.output
    assert "dc1: stopped" in done.output and "dc2: already stopped" in done.output, done.output
    done = _run(tmp_path, "down")
    assert done.exit_code == 0 and "stopped dc" not in done.output, done.output
    assert "dc1: already stopped" in done.output and "dc2: already stopped" in done.output


# -- item 5: down --purge -------------------------------------------------------------------------


def test_down_purge_removes_every_cluster_directory_and_lists_exactly_what_it_removed(
    tmp_path: Path, fake: FakeBrokers
) -> None:
    assert _run(tmp_path, "up", "--clusters", "dc1").exit_code == 0
    local = tmp_path / "local"
    garbled = local / "dc\u00e2\u0098\u0083" / "broker-1" / "data"  # where Java wrote dc☃'s data
    garbled.mkdir(parents=True)
    (local / "notes.txt").write_text("mine")
    done = _run(tmp_path, "down", "--purge")
    assert done.exit_code == 0, done.output
    assert f"removed {local / 'dc1'}" in done.output, done.output
    assert f"removed {garbled.parents[1]}" in done.output, done.output
    assert f"removed {tmp_path / 'drkit.yaml'}" in done.output, done.output
    assert f"left {local / 'notes.txt'}" in done.output, done.output
    assert not (local / "dc1").exists() and not garbled.parents[1].exists()
    assert "removed data" not in done.output
    done = _run(tmp_path, "down", "--purge")
    assert done.exit_code == 0 and "removed nothing" in done.output, done.output


# -- item 6: a broker that exits during start-up --------------------------------------------------


def test_a_broker_exiting_on_a_port_in_use_is_named_by_its_bind_error_in_one_line(
    tmp_path: Path, fake: FakeBrokers
) -> None:
    assert _run(tmp_path, "up", "--clusters", "dc1").exit_code == 0
    assert _run(tmp_path, "stop", "dc1").exit_code == 0
    fake.dies["dc1"] = BIND_FAILURE
    port = json.loads((tmp_path / "local" / "dc1" / "cluster.json").read_text())["brokers"][0]
    done = _run(tmp_path, "start", "dc1")
    assert done.exit_code == 1, done.output
    errors = [line for line in done.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and len(done.output.strip().splitlines()) == 1, done.output
    wanted = f"Address already in use: 127.0.0.1:{port['controller_port']}"
    assert wanted in errors[0], done.output
    assert "Exiting Kafka" not in done.output and "Registered kafka" not in done.output


def test_the_first_error_of_this_start_names_a_start_up_death_not_an_older_one(
    tmp_path: Path, fake: FakeBrokers
) -> None:
    assert _run(tmp_path, "up", "--clusters", "dc1").exit_code == 0
    log = tmp_path / "local" / "dc1" / "broker-1" / "logs" / "server.log"
    log.write_text("[old] ERROR an error of an earlier run (kafka.Old)\n")
    assert _run(tmp_path, "stop", "dc1").exit_code == 0
    fake.dies["dc1"] = (
        "[t] INFO starting (kafka.Kafka$)\n"
        "[t] ERROR Exiting Kafka due to fatal exception during startup. (kafka.Kafka$)\n"
        "java.lang.IllegalArgumentException: log.dirs holds no directory\n"
    )

    done = _run(tmp_path, "start", "dc1")
    assert done.exit_code == 1, done.output
    assert "earlier run" not in done.output
    assert "fatal exception during startup" in done.output, done.output
    assert "IllegalArgumentException: log.dirs holds no directory" in done.output


def test_a_port_held_by_another_process_is_named_before_any_broker_starts(
    tmp_path: Path, fake: FakeBrokers
) -> None:
    assert _run(tmp_path, "up", "--clusters", "dc1").exit_code == 0
    assert _run(tmp_path, "stop", "dc1").exit_code == 0
    port = json.loads((tmp_path / "local" / "dc1" / "cluster.json").read_text())["brokers"][0]
    fake.started.clear()
    with socket.socket() as held:
        held.bind(("127.0.0.1", port["port"]))
        held.listen()
        for args in (("start", "dc1"), ("up", "--clusters", "dc1")):
            done = _run(tmp_path, *args)
            assert done.exit_code == 1, done.output
            assert f"127.0.0.1:{port['port']} is in use" in done.output, done.output
    # Named before any broker starts (a started one would bind, fail and exit seconds later,
    # with its bind error): none was (issue 51: the cause, not a clock).
    assert fake.started == []


# -- issue 45, item 8: a `start` whose brokers never become ready ---------------------------------


def test_a_start_that_times_out_stops_the_brokers_it_started_and_says_which(
    tmp_path: Path, fake: FakeBrokers
) -> None:
    """`up` stopped what it started when readiness failed; `start` left its brokers running,
    half-up, without a word."""
    assert _run(tmp_path, "up", "--brokers", "2").exit_code == 0
    assert _run(tmp_path, "kill", "dc1").exit_code == 0
    fake.not_ready.add("dc1")
    done = _run(tmp_path, "start", "dc1")
    assert done.exit_code == 1, done.output
    assert "dc1 did not become ready" in done.output, done.output
    assert "stopped what this start started: dc1 broker(s) 1, 2" in done.output, done.output
    assert "Traceback" not in done.output
    state = json.loads((tmp_path / "local" / "dc1" / "cluster.json").read_text())
    assert [b["pid"] for b in state["brokers"]] == [None, None]
    assert len(fake.alive) == 2  # dc2's, untouched
    # One broker running before: only the one this start began is stopped, the other named.
    fake.not_ready.clear()
    assert _run(tmp_path, "start", "dc1", "--broker", "2").exit_code == 0
    fake.not_ready.add("dc1")
    done = _run(tmp_path, "start", "dc1")
    assert done.exit_code == 1, done.output
    assert "stopped what this start started: dc1 broker(s) 1;" in done.output, done.output
    assert "left running: dc1 broker(s) 2 (running before); 'drkit local stop dc1'" in (
        done.output
    ), done.output
    assert len(fake.alive) == 3
