"""Issue 45: a listener that takes the connection but is not a broker answering - hung, HTTP,
TLS - was reported after the whole timeout as "unreachable (Broker transport failure)". Now
`clusters check` says what answered, within seconds."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from drkit.cli import cli
from drkit.kafka.clients import ClusterEndpoint, not_kafka
from tests.kafka_requests import record_kafka_requests


@contextmanager
def _listener(answer: Callable[[socket.socket], None]) -> Iterator[int]:
    """A TCP listener on loopback handing each connection to ``answer``."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=answer, args=(connection,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        server.close()


def _silent(connection: socket.socket) -> None:
    time.sleep(10)
    connection.close()


class _Held:
    """Silent listeners that note, in order, when a client's Kafka request arrived on a
    connection and when that client gave up on it (closed it): the order of a command's
    probes, with no clock.  A connection that sends nothing (the TCP pre-probe) is not noted."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self._lock = threading.Lock()

    def answer(self, name: str) -> Callable[[socket.socket], None]:
        def serve(connection: socket.socket) -> None:
            connection.settimeout(30)
            asked = False
            try:
                while connection.recv(64):
                    if not asked:
                        asked = True
                        self._note(f"{name} asked")
            except OSError:
                pass
            finally:
                connection.close()
                if asked:
                    self._note(f"{name} given up")

        return serve

    def _note(self, event: str) -> None:
        with self._lock:
            self.events.append(event)

    def asked_together(self, *names: str) -> bool:
        """Every one of ``names`` was asked before any of them was given up on."""
        with self._lock:
            events = list(self.events)
        first_given_up = next(
            (i for i, e in enumerate(events) if e.endswith("given up")), len(events)
        )
        return {f"{n} asked" for n in names} <= set(events[:first_given_up])


def _http(connection: socket.socket) -> None:
    connection.recv(64)
    connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    connection.close()


def _tls(connection: socket.socket) -> None:
    connection.recv(64)
    connection.sendall(b"\x15\x03\x03\x00\x02\x02\x32")  # alert: decode_error
    connection.close()


def _closes(connection: socket.socket) -> None:
    connection.recv(64)
    connection.close()


def test_what_answered_instead_of_a_broker_is_named() -> None:
    cases = {
        _silent: "does not answer Kafka's first request within 1s",
        _http: "answers HTTP, not Kafka",
        _tls: "speaks TLS: set security.protocol to SSL or SASL_SSL",
        _closes: "closed the connection on Kafka's first request",
    }
    for answer, said in cases.items():
        with _listener(answer) as port:
            found = not_kafka(ClusterEndpoint.plain("dc1", f"127.0.0.1:{port}"), 1.0)
        assert found is not None and said in found, (answer.__name__, found)
    # Nothing listening: not this check's to say (tcp_unreachable names the refusal).
    assert not_kafka(ClusterEndpoint.plain("dc1", "127.0.0.1:1"), 1.0) is None


def test_clusters_check_names_a_hung_listener_in_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = record_kafka_requests(monkeypatch)
    with _listener(_silent) as port:
        config = tmp_path / "c.yaml"
        config.write_text(f"clusters:\n  dc1: {{bootstrap_servers: '127.0.0.1:{port}'}}\n")
        done = CliRunner().invoke(
            cli, ["--state-dir", str(tmp_path / "s"), "clusters", "check", "--config",
                  str(config), "--timeout", "60"],
        )  # fmt: skip
    assert done.exit_code == 3, done.output
    assert "does not answer Kafka's first request within 1.5s" in done.output, done.output
    # Named by the 1.5 s first-answer probe, not after a Kafka client waited out the command's
    # own 60 s: no Kafka request was made at all (issue 51: a mechanism, not a clock).
    assert requests == [], requests


_REFUSED = (
    "clusters:\n"
    "  dc1: {bootstrap_servers: '127.0.0.1:1', principals: {replicator: 'User:r'}}\n"
    "  dc2: {bootstrap_servers: '127.0.0.1:2', principals: {replicator: 'User:r'}}\n"
    "flows: [{source: dc1, target: dc2}]\n"
)


@pytest.mark.parametrize(
    ("command", "named"),
    [
        (["acls", "--role", "replicator", "--cluster", "dc2", "--apply"], "'dc2' at 127.0.0.1:2"),
        (["groups", "lag", "--cluster", "dc1"], "'dc1' at 127.0.0.1:1"),
        (["drill", "run", "planned-switchover", "--skip-verify"], "'dc1' at 127.0.0.1:1"),
    ],
)
def test_a_refused_cluster_is_named_at_once_with_exit_3(
    tmp_path: Path, command: list[str], named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45: these waited out a 15 s client timeout, then said "timed out" with exit 1;
    a cluster whose bootstrap refuses is unreachable at once, worded and numbered (exit 3) as
    `clusters check` and `offsets translate` say it."""
    config = tmp_path / "c.yaml"
    config.write_text(_REFUSED)
    requests = record_kafka_requests(monkeypatch)
    done = CliRunner().invoke(
        cli, ["--state-dir", str(tmp_path / "s"), *command, "--config", str(config)]
    )
    assert done.exit_code == 3, done.output
    assert f"cluster {named} is unreachable (no bootstrap server accepts" in done.output, (
        done.output
    )
    assert "Traceback" not in done.output
    # At once: told by the refused TCP connection, with no Kafka request made - any request
    # to a refused cluster waits out the client's 15 s (issue 51: a mechanism, not a clock).
    assert requests == [], requests


@pytest.mark.parametrize("command", [["clusters", "check"], ["doctor"]])
def test_a_timeout_below_one_second_is_refused_naming_the_minimum(
    tmp_path: Path, command: list[str]
) -> None:
    """Issue 45, W5: --timeout 0.001 was taken and not honoured (the pre-probe and the Kafka
    client's one-second tries ran anyway); no Kafka round trip and login fits in it, so it is
    refused with exit 2 naming the minimum."""
    config = tmp_path / "c.yaml"
    config.write_text(_REFUSED)
    done = CliRunner().invoke(
        cli, ["--state-dir", str(tmp_path / "s"), *command, "--config", str(config),
              "--timeout", "0.001"],
    )  # fmt: skip
    assert done.exit_code == 2, done.output
    assert "--timeout" in done.output and "at least 1" in done.output, done.output


@pytest.mark.parametrize("command", [["clusters", "check"], ["doctor"]])
def test_the_timeout_bounds_the_whole_check(
    tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45, W5: `doctor --timeout 1` took the pre-probe, then the client's wait, cluster
    after cluster; the clusters are checked at once, each within the timeout."""
    held = _Held()
    requests = record_kafka_requests(monkeypatch)
    with _listener(held.answer("dc1")) as one, _listener(held.answer("dc2")) as two:
        config = tmp_path / "c.yaml"
        config.write_text(
            f"clusters:\n  dc1: {{bootstrap_servers: '127.0.0.1:{one}'}}\n"
            f"  dc2: {{bootstrap_servers: '127.0.0.1:{two}'}}\n"
        )
        done = CliRunner().invoke(
            cli, ["--state-dir", str(tmp_path / "s"), *command, "--config", str(config),
                  "--timeout", "3"],
        )  # fmt: skip
    assert done.exit_code == 3, done.output
    assert done.output.count("does not answer Kafka's first request within 1.5s") == 2, done.output
    # At once, not one after the other: both clusters were asked before either was given up
    # on; and nothing waited on a Kafka client after the probe (issue 51: an order and a
    # count, not a clock).
    assert held.asked_together("dc1", "dc2"), held.events
    assert requests == [], requests


def test_a_drill_names_an_unreachable_spark_master_before_it_starts(tmp_path: Path) -> None:
    """Issue 45: `drill run --spark-master spark://127.0.0.1:1` learnt of the dead master at its
    proof, after the fault and the failover; it is named at the start, nothing done."""
    config = tmp_path / "c.yaml"
    config.write_text(_REFUSED)
    done = CliRunner().invoke(
        cli, ["--state-dir", str(tmp_path / "s"), "drill", "run", "planned-switchover",
              "--spark-master", "spark://127.0.0.1:1", "--config", str(config)],
    )  # fmt: skip
    assert done.exit_code == 3, done.output
    assert "Spark master spark://127.0.0.1:1 is unreachable" in done.output, done.output
    assert not (tmp_path / "s" / "drkit.db").exists()  # before the store, the clusters, the drill


@pytest.mark.parametrize("procedure", ["switchover", "cutover"])
def test_a_planned_move_names_a_hung_source_at_once_and_plans_nothing(
    tmp_path: Path, procedure: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45, seventh trial (zi02, zj06): `switchover --plan` with a frozen or not-Kafka
    source waited 3 s for it, then read the target: 6-9 s, to a plan blocked on the source.
    A planned move needs both clusters - the hung one is named (exit 3) after the first
    answer's 2 s, before any store or Kafka client, with the command that moves without it;
    and both are asked at once: a hung source and a hung target cost one wait, not two."""
    held = _Held()
    requests = record_kafka_requests(monkeypatch)
    with _listener(held.answer("dc1")) as one, _listener(held.answer("dc2")) as two:
        config = tmp_path / "c.yaml"
        config.write_text(
            f"clusters:\n  dc1: {{bootstrap_servers: '127.0.0.1:{one}'}}\n"
            f"  dc2: {{bootstrap_servers: '127.0.0.1:{two}'}}\n"
            "flows: [{source: dc1, target: dc2}, {source: dc2, target: dc1}]\n"
        )
        done = CliRunner().invoke(
            cli, ["--state-dir", str(tmp_path / "s"), procedure, "--from", "dc1", "--to",
                  "dc2", "--plan", "--config", str(config)],
        )  # fmt: skip
    assert done.exit_code == 3, done.output
    assert f"cluster 'dc1' at 127.0.0.1:{one} is unreachable" in done.output, done.output
    assert "does not answer Kafka's first request within 1.5s" in done.output
    assert f"a {procedure} needs both clusters" in done.output
    assert "drkit failover --from dc1 --to dc2" in done.output
    assert not (tmp_path / "s" / "drkit.db").exists()  # nothing planned, nothing stored
    # One first-answer wait, not two: both were asked before either was given up on; and no
    # Kafka client was asked anything - no plan (issue 51: an order and a count, not a clock).
    assert held.asked_together("dc1", "dc2"), held.events
    assert requests == [], requests


def _hung_source_refused_target(tmp_path: Path, port: int) -> Path:
    """A config whose dc1 is the listener on ``port`` and dc2 refuses: the flow dc1->dc2."""
    config = tmp_path / "c.yaml"
    config.write_text(
        f"clusters:\n  dc1: {{bootstrap_servers: '127.0.0.1:{port}'}}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:1'}\n"
        "flows: [{source: dc1, target: dc2}]\n"
    )
    return config


def _refused_source_listening_target(tmp_path: Path, port: int) -> Path:
    """A config whose dc1 refuses and dc2 is the listener on ``port``: the flow dc1->dc2."""
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        f"  dc2: {{bootstrap_servers: '127.0.0.1:{port}'}}\n"
        "flows: [{source: dc1, target: dc2}]\n"
    )
    return config


def test_an_unplanned_failover_is_still_planned_without_its_source(tmp_path: Path) -> None:
    """The pre-check is for planned moves only: a failover exists for a source that is gone."""
    with _listener(_silent) as one:
        config = _hung_source_refused_target(tmp_path, one)
        done = CliRunner().invoke(
            cli, ["--state-dir", str(tmp_path / "s"), "failover", "--from", "dc1", "--to",
                  "dc2", "--plan", "--config", str(config)],
        )  # fmt: skip
    assert done.exit_code == 4, done.output  # planned, and blocked by the target refused
    assert "source UNREACHABLE" in done.output and "needs both clusters" not in done.output


def test_readiness_with_a_hung_source_is_not_ready_after_the_first_answer_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45, seventh trial (i07, zj17): `drill readiness` with a frozen or not-Kafka source
    planned a switchover first - the plan's 3 s wait for the source, then its reads and
    translation: 7-16 s.  Both clusters are asked first, at once; one that does not answer
    makes every check 'not checked', naming it and why, and no plan is made (the timeline
    says so); the report is stored as before."""
    import json

    requests = record_kafka_requests(monkeypatch)
    with _listener(_silent) as one:
        config = _hung_source_refused_target(tmp_path, one)
        done = CliRunner().invoke(
            cli, ["--state-dir", str(tmp_path / "s"), "drill", "readiness", "--from", "dc1",
                  "--to", "dc2", "--config", str(config), "-o", "json"],
        )  # fmt: skip
    assert done.exit_code == 3, done.output
    report = json.loads(done.stdout)
    assert report["verdict"] == "NotReady" and report["rpo_measured"] is False
    assert [c["name"] for c in report["checks"]] == [
        "plan_unblocked", "topic_parity", "checkpoints", "link_health", "shadow_translation"
    ]  # fmt: skip
    for check in report["checks"]:
        assert not check["passed"], check
        assert "dc1 does not answer (" in check["detail"], check
        assert "Kafka's first request within 1.5s" in check["detail"], check
        assert "dc2 does not answer (" in check["detail"], check  # refused: both named
    assert [e["kind"] for e in report["timeline"]] == ["clusters_checked"], report["timeline"]
    # One first-answer wait and no plan: no Kafka client was asked anything (a plan waits for
    # the source, then reads both clusters - issue 51: a count, not a clock).
    assert requests == [], requests


def _kafka(connection: socket.socket) -> None:
    """A PLAINTEXT broker: answers ApiVersions with the request's correlation id."""
    request = connection.recv(64)
    connection.sendall((4).to_bytes(4, "big") + request[8:12])
    time.sleep(0.5)
    connection.close()


def test_a_tls_client_set_up_for_a_plaintext_listener_is_told_at_once() -> None:
    """Eighth trial (y44, issue 45): security.protocol SSL against a PLAINTEXT listener waited
    20 s and said 'unreachable (Broker transport failure)' - the plain probe was skipped for TLS
    endpoints. A listener that answers Kafka's first request without TLS is named."""
    from drkit.config.model import ClusterConfig

    with _listener(_kafka) as port:
        config = ClusterConfig.model_validate(
            {"bootstrap_servers": f"127.0.0.1:{port}", "security": {"protocol": "SSL"}}
        )
        found = not_kafka(ClusterEndpoint("dc1", config), 1.0)
    # Told from the plain broker's answer - the slow path (a TLS handshake or a read waiting
    # out its 1 s) says "does not answer" or nothing, never this (issue 51: no clock).
    assert found is not None and "without TLS" in found and "PLAINTEXT" in found, found
    # A TLS listener (or anything that is not a plain broker) is not this check's to judge.
    for answer in (_tls, _closes):
        with _listener(answer) as port:
            security = {"protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "username": "u"}
            config = ClusterConfig.model_validate(
                {"bootstrap_servers": f"127.0.0.1:{port}", "security": security | {"password": "p"}}
            )
            assert not_kafka(ClusterEndpoint("dc1", config), 1.0) is None, answer.__name__


def test_a_tls_listener_is_never_sent_plain_bytes(tmp_path: Path) -> None:
    """The TLS-vs-PLAINTEXT check above must not cost a TLS cluster's brokers a failed
    authentication (and a log line) on every drkit command: a listener that speaks TLS gets a
    TLS handshake, never Kafka's plain first request."""
    import ssl

    from drkit.config.model import ClusterConfig
    from tests.unit.test_listening_tls import _self_signed

    files = _self_signed(tmp_path)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(files.certificate, files.key)
    first_bytes: list[bytes] = []

    def tls(connection: socket.socket) -> None:
        connection.settimeout(2)
        first_bytes.append(connection.recv(1, socket.MSG_PEEK))
        try:
            with server.wrap_socket(connection, server_side=True) as wrapped:
                wrapped.recv(1)
        except (OSError, ssl.SSLError):
            pass

    with _listener(tls) as port:
        config = ClusterConfig.model_validate(
            {"bootstrap_servers": f"127.0.0.1:{port}", "security": {"protocol": "SSL"}}
        )
        assert not_kafka(ClusterEndpoint("dc1", config), 1.0) is None
        time.sleep(0.2)
    assert first_bytes and all(b == b"\x16" for b in first_bytes), first_bytes


# A listener that takes the connection but answers no Kafka, and what drkit says of it.
_NO_KAFKA = [
    (_silent, "does not answer Kafka's first request within 1.5s"),
    (_http, "answers HTTP, not Kafka"),
]


@pytest.mark.parametrize(("answer", "said"), _NO_KAFKA)
def test_offsets_translate_names_a_target_that_answers_no_kafka(
    tmp_path: Path, answer: Callable[[socket.socket], None], said: str
) -> None:
    """Issue 45 (bench errors, 2026-12-05): `offsets translate` waited 15 s for the target's
    metadata and said only 'unreachable (Broker transport failure)' for a hung, HTTP or TLS
    listener.  Both clusters are asked first, at once, what answers: the target's cause named,
    exit 3, for the groups and for offsets given by hand alike."""
    with _listener(answer) as port:
        config = tmp_path / "c.yaml"
        config.write_text(
            f"clusters:\n  dc1: {{bootstrap_servers: '127.0.0.1:{port}'}}\n"
            f"  dc2: {{bootstrap_servers: '127.0.0.1:{port}'}}\n"
            "flows: [{source: dc1, target: dc2}]\n"
        )
        for how in (["--group", "billing"], ["--offset", "orders:0:5"]):
            done = CliRunner().invoke(
                cli, ["--state-dir", str(tmp_path / "s"), "offsets", "translate", *how,
                      "--from", "dc1", "--to", "dc2", "--config", str(config)],
            )  # fmt: skip
            assert done.exit_code == 3, done.output
            assert f"cluster 'dc2' at 127.0.0.1:{port} is unreachable" in done.output
            assert said in done.output, done.output
            assert "Broker transport failure" not in done.output


@pytest.mark.parametrize(("answer", "said"), _NO_KAFKA)
def test_a_failover_plan_names_why_its_target_does_not_answer(
    tmp_path: Path, answer: Callable[[socket.socket], None], said: str
) -> None:
    """Issue 45 (bench errors, 2026-12-05): with a hung or non-Kafka target `failover --plan`
    waited out a 10 s metadata request and blocked on 'dc2 does not answer: nothing can be
    promoted', no cause given.  The snapshot asks both clusters first, at once: the blocker
    says what answered instead."""
    with _listener(answer) as port:
        config = _refused_source_listening_target(tmp_path, port)
        done = CliRunner().invoke(
            cli, ["--state-dir", str(tmp_path / "s"), "failover", "--from", "dc1", "--to",
                  "dc2", "--plan", "--config", str(config)],
        )  # fmt: skip
    assert done.exit_code == 4, done.output
    blocker = next(line for line in done.output.splitlines() if "nothing can be promoted" in line)
    assert "dc2 does not answer (" in blocker and said in blocker, blocker


def test_checkpoint_with_no_cluster_answering_exits_naming_it(tmp_path: Path) -> None:
    """Issue 45 (bench errors, 2026-12-05): `drkit checkpoint` had no start-up check - with
    both clusters refused, hung or not Kafka its workers retried for ever, logging 'create
    topics: timed out after 15s' (also for a refused port).  Now as `drkit replicate`: exit 3
    at start, the cluster named with why.  (The timeout only bounds the old behaviour.)"""
    import subprocess
    import sys

    with _listener(_http) as port:
        config = _refused_source_listening_target(tmp_path, port)
        command = [sys.executable, "-m", "drkit", "--state-dir", str(tmp_path / "s"),
                   "checkpoint", "--config", str(config)]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired as still:
            pytest.fail(f"still running after 60 s: {still.stderr!r}")
    assert done.returncode == 3, done.stderr
    assert "cluster 'dc1' at 127.0.0.1:1 is unreachable" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_status_says_why_a_probe_failed(tmp_path: Path) -> None:
    """Issue 45 (bench errors, 2026-12-05): under every fault `drkit status` said only
    'UNKNOWN - probe failed (1 of 3 in a row to be UNAVAILABLE)' for each cluster - refused,
    unresolvable, hung or HTTP alike.  The failed probe's cause is on the line after."""
    with _listener(_http) as port:
        config = _refused_source_listening_target(tmp_path, port)
        done = CliRunner().invoke(
            cli, ["--state-dir", str(tmp_path), "status", "--config", str(config)]
        )
    assert done.exit_code == 3, done.output
    lines = done.output.splitlines()
    for alias, cause in (("dc1", "Connection refused"), ("dc2", "answers HTTP, not Kafka")):
        at = next(i for i, line in enumerate(lines) if line.split()[:1] == [alias])
        assert "probe failed" in lines[at + 1], lines[at : at + 3]
        assert lines[at + 2].strip().startswith("why: ") and cause in lines[at + 2], lines
