"""``drkit offsets translate --offset``: positions kept outside Kafka, parsed and checked before
any cluster is asked (the translation itself runs on real brokers in test_translation)."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from drkit.cli import cli
from drkit.cli.monitor_cmd import translator
from drkit.config import load_config_text
from drkit.errors import ConfigError, UnreachableClusterError
from drkit.offsets.lookup import parse_offsets
from drkit.records import TopicPartition
from drkit.status.web import StatusApp
from drkit.store import StateStore
from tests.replication_support import free_ports


def test_offsets_parse_from_arguments_and_from_json_on_stdin() -> None:
    stdin = io.StringIO('[{"topic": "payments", "partition": 1, "offset": 7}]')
    assert parse_offsets(("orders:0:1200", "my.topic-x:3:0", "-"), stdin) == {
        TopicPartition("orders", 0): 1200,
        TopicPartition("my.topic-x", 3): 0,
        TopicPartition("payments", 1): 7,
    }


@pytest.mark.parametrize(
    "value",
    # Kafka's partitions are 32-bit and its offsets 64-bit signed: past them librdkafka raised
    # OverflowError (a 500 from /api/translate, a traceback from the CLI).
    [
        "orders:0",
        "orders:x:1",
        "orders:0:-1",
        ":0:1",
        "orders",
        "orders:-2:5",
        f"orders:{2**31}:5",
        f"orders:0:{2**63}",
    ],
)
def test_a_malformed_offset_is_named(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_offsets((value,), io.StringIO())
    assert value in str(caught.value.lines())


def test_a_partition_given_twice_with_two_offsets_is_refused() -> None:
    with pytest.raises(ConfigError, match="given twice"):
        parse_offsets(("orders:0:5", "orders:0:6"), io.StringIO())


def test_stdin_that_is_not_the_list_is_named() -> None:
    with pytest.raises(ConfigError, match="stdin is not a JSON list"):
        parse_offsets(("-",), io.StringIO('{"orders": 5}'))


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ([], "--group/--offset"),
        (["--group", "g", "--offset", "orders:0:1"], "--group/--offset"),
        (["--offset", "orders:0"], "--offset"),
        (["--offset", "orders:0:1", "--from-checkpoints"], "--from-checkpoints"),
    ],
)
def test_the_command_refuses_bad_input_before_asking_a_cluster(
    tmp_path: Path, args: list[str], named: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\n"
        "flows: [{source: dc1, target: dc2}]\n"
    )
    result = CliRunner().invoke(
        cli, ["offsets", "translate", "--from", "dc1", "--to", "dc2", "--config", str(config),
              *args],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output


def _ask(app: StatusApp, query: str) -> tuple[str, dict[str, Any]]:
    answer: list[str] = []
    environ = {"PATH_INFO": "/api/translate", "QUERY_STRING": query, "REQUEST_METHOD": "GET"}
    body = b"".join(app(environ, lambda status, _headers: answer.append(status)))
    return answer[0], json.loads(body)


def test_the_monitor_translates_given_offsets_over_http() -> None:
    """/api/translate: the CLI's answer for a flow and offsets; 400 naming bad input, 503
    naming a cluster that does not answer."""
    config = load_config_text(
        "clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  dc2: {bootstrap_servers: '127.0.0.1:2'}\nflows: [{source: dc1, target: dc2}]\n",
        env={},
    )
    asked: list[tuple[str, list[str]]] = []

    def translate(flow: str, values: list[str]) -> dict[str, Any]:
        asked.append((flow, values))
        if "orders:0:13" in values:
            raise UnreachableClusterError("dc2", "127.0.0.1:2")
        # the real one: refuses before any I/O (the store is read only for a known flow)
        return translator(config, StateStore("sqlite://"))(flow, values)

    app = StatusApp(lambda: None, lambda: None, translate)  # type: ignore[arg-type,return-value]
    status, body = _ask(app, "flow=dc1->dc9&offset=orders:0:5")
    assert status.startswith("400") and "no flow 'dc1->dc9'" in body["error"]
    status, body = _ask(app, "flow=dc1->dc2&offset=orders:zero:5")
    assert status.startswith("400") and "orders:zero:5" in body["error"]
    status, body = _ask(app, "flow=dc1->dc2")
    assert status.startswith("400") and "offset=TOPIC:PARTITION:OFFSET" in body["error"]
    status, body = _ask(app, "flow=dc1-%3Edc2&offset=orders:0:13&offset=orders:1:2")
    assert status.startswith("503") and "'dc2' at 127.0.0.1:2 is unreachable" in body["error"]
    assert asked[-1] == ("dc1->dc2", ["orders:0:13", "orders:1:2"])


def test_the_status_server_answers_reads_only_and_says_not_to_sniff_or_frame() -> None:
    """Issue 46, low: it answered any method; nothing there changes state, so anything but GET
    and HEAD is refused (405, naming what is allowed)."""
    app = StatusApp(lambda: None, lambda: None)  # type: ignore[arg-type,return-value]
    answers: list[tuple[str, dict[str, str]]] = []

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answers.append((status, dict(headers)))

    for method, expected in (("POST", "405"), ("DELETE", "405"), ("GET", "404")):
        b"".join(app({"PATH_INFO": "/nowhere", "REQUEST_METHOD": method}, start_response))
        status, headers = answers[-1]
        assert status.startswith(expected), (method, status)
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["X-Frame-Options"] == "DENY"
        if expected == "405":
            assert headers["Allow"] == "GET, HEAD"


def _asked_with(app: StatusApp, query: str, **headers: str) -> tuple[str, dict[str, str], Any]:
    answer: list[tuple[str, dict[str, str]]] = []
    environ = {"PATH_INFO": "/api/translate", "QUERY_STRING": query, "REQUEST_METHOD": "GET",
               **{f"HTTP_{k.upper()}": v for k, v in headers.items()}}  # fmt: skip
    body = b"".join(app(environ, lambda s, h: answer.append((s, dict(h)))))
    return answer[0][0], answer[0][1], json.loads(body)


def _echo(_flow: str, values: list[str]) -> dict[str, Any]:
    return {"offsets": len(values)}


def test_translate_requires_the_token_when_one_is_set_and_beyond_loopback() -> None:
    """Issue 46, item 5: an unauthenticated, expensive API: a token when configured (401
    without it, compared in constant time), refused beyond loopback when none is (403)."""
    app = StatusApp(lambda: None, lambda: None, _echo, api_token="s3cret")  # type: ignore[arg-type,return-value]
    status, headers, body = _asked_with(app, "flow=a->b&offset=t:0:1")
    assert status.startswith("401") and headers["WWW-Authenticate"].startswith("Bearer")
    assert _asked_with(app, "flow=a->b&offset=t:0:1", authorization="Bearer wrong")[0][:3] == "401"
    status, _, body = _asked_with(app, "flow=a->b&offset=t:0:1", authorization="Bearer s3cret")
    assert status.startswith("200") and body == {"offsets": 1}
    open_wide = StatusApp(lambda: None, lambda: None, _echo, beyond_loopback=True)  # type: ignore[arg-type,return-value]
    status, _, body = _asked_with(open_wide, "flow=a->b&offset=t:0:1")
    assert status.startswith("403") and "--api-token-file" in body["error"]
    local = StatusApp(lambda: None, lambda: None, _echo)  # type: ignore[arg-type,return-value]
    assert _asked_with(local, "flow=a->b&offset=t:0:1")[0].startswith("200")


def test_translate_is_bounded_in_offsets_per_call_and_calls_at_once() -> None:
    app = StatusApp(lambda: None, lambda: None, _echo)  # type: ignore[arg-type,return-value]
    many = "&".join(f"offset=t:{p}:1" for p in range(1001))
    status, _, body = _asked_with(app, f"flow=a->b&{many}")
    assert status.startswith("400") and "at most 1000 per call" in body["error"]
    release = threading.Event()
    entered = threading.Semaphore(0)

    def slow(_flow: str, values: list[str]) -> dict[str, Any]:
        entered.release()
        assert release.wait(10)
        return {"offsets": len(values)}

    busy = StatusApp(lambda: None, lambda: None, slow)  # type: ignore[arg-type,return-value]
    callers = [threading.Thread(target=_asked_with, args=(busy, "flow=a->b&offset=t:0:1"))
               for _ in range(2)]  # fmt: skip
    for caller in callers:
        caller.start()
    assert entered.acquire(timeout=5) and entered.acquire(timeout=5)
    status, headers, body = _asked_with(busy, "flow=a->b&offset=t:0:1")
    assert status.startswith("503") and headers["Retry-After"] == "1" and "busy" in body["error"]
    release.set()
    for caller in callers:
        caller.join(5)
    assert _asked_with(busy, "flow=a->b&offset=t:0:1")[0].startswith("200")


def test_a_loopback_listener_answers_only_requests_for_a_loopback_name() -> None:
    """DNS rebinding: a web page under an attacker's name can make a browser on this host call
    127.0.0.1 - the Host header still names the attacker's host, and is refused (421). Served
    for real (waitress), as the monitor serves it."""
    import http.client

    from drkit.status.web import serve

    app = StatusApp(lambda: None, lambda: None, _echo)  # type: ignore[arg-type,return-value]
    server = serve(app, "127.0.0.1", 0)
    try:
        answers = {}
        for host in ("evil.example", "127.0.0.1", "localhost:80", "evil.example:9464"):
            connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=5)
            connection.request(
                "GET", "/api/translate?flow=a->b&offset=t:0:1", headers={"Host": host}
            )
            answers[host] = connection.getresponse().status
            connection.close()
        assert answers == {"evil.example": 421, "127.0.0.1": 200, "localhost:80": 200,
                           "evil.example:9464": 421}  # fmt: skip
    finally:
        server.shutdown()


def test_a_token_file_that_cannot_be_read_or_is_empty_is_refused_before_anything(
    tmp_path: Path,
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for path, why in ((tmp_path / "missing", "cannot read"), (empty, "the first line is empty")):
        args = [
            "--state-dir",
            str(tmp_path / "s"),
            "monitor",
            "--config",
            str(config),
            "--listen",
            f"127.0.0.1:{free_ports()}",
        ]  # the default may be taken here
        done = CliRunner().invoke(cli, [*args, "--api-token-file", str(path)])
        assert done.exit_code == 2, done.output
        assert "--api-token-file: " in done.output
        assert why in done.output and "Traceback" not in done.output
    assert not (tmp_path / "s" / "drkit.db").exists()  # refused before any store was opened


def test_metrics_listen_serves_metrics_and_health_and_nothing_else(tmp_path: Path) -> None:
    """Issue 46, item 5: /metrics shared its port with /api/translate and the status API, so
    opening it to a scraper's network opened the API too. ``--metrics-listen`` is a second
    listener with /metrics and /healthz only; --listen keeps serving everything."""
    import os
    import re
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    config = tmp_path / "c.yaml"
    config.write_text("clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "drkit", "--state-dir", str(tmp_path / "s"), "monitor",
         "--config", str(config), "--listen", "127.0.0.1:0",
         "--metrics-listen", "127.0.0.1:0", "--observer", "metrics-port-test"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )  # fmt: skip

    def status(url: str) -> int:
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                return int(reply.status)
        except urllib.error.HTTPError as err:
            return err.code

    try:
        assert process.stdout is not None
        ports: dict[str, int] = {}
        for line in process.stdout:
            if found := re.match(r"monitor metrics-port-test: http://127.0.0.1:(\d+)/", line):
                ports["main"] = int(found.group(1))
            if found := re.match(r"metrics: http://127.0.0.1:(\d+)/metrics", line):
                ports["metrics"] = int(found.group(1))
                break
        main, scrape = (f"http://127.0.0.1:{ports[k]}" for k in ("main", "metrics"))
        assert status(f"{scrape}/metrics") == 200
        assert status(f"{scrape}/healthz") in (200, 503)  # its liveness, either way
        for path in ("/api/status", "/", "/api/translate?flow=a->b&offset=t:0:1"):
            assert status(f"{scrape}{path}") == 404, path
        assert status(f"{main}/metrics") == 200 and status(f"{main}/api/status") == 200
    finally:
        process.terminate()
        process.wait(30)


def test_checkpoints_asked_for_do_not_claim_the_source_is_unreachable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The third new-user trial: ``--from-checkpoints`` with every cluster up printed "from
    checkpoints (dc1 unreachable)" - the source was never probed."""
    from drkit.cli.offsets_cmd import _print
    from drkit.offsets.lookup import Report

    config = load_config_text(
        "clusters: {dc1: {bootstrap_servers: '127.0.0.1:1'}, dc2: {bootstrap_servers: "
        "'127.0.0.1:2'}}\nflows: [{source: dc1, target: dc2}]\n"
    )
    for reachable, said in ((None, "from checkpoints (as asked)"),
                            (False, "from checkpoints (dc1 unreachable)")):  # fmt: skip
        _print(Report(config.flows[0], "checkpoints", reachable, checkpoint_age_s=1.0))
        assert said in capsys.readouterr().out


def test_the_monitor_keeps_each_flows_offset_map_between_translations() -> None:
    """Security review 7, L4: every /api/translate call made a mapping loader of its own and
    read the flow's offset-sync and progress topics from the start.  The monitor keeps one
    loader per flow, target connection and key (it then reads only what was appended, and
    keeps the claims it checked), lends it to one call at a time, and closes them all."""
    import threading
    from typing import cast

    from drkit.offsets.lookup import KeptLoaders
    from drkit.offsets.mapping_loader import MappingLoader

    made: list[Any] = []

    class Loader:
        closed = False

        def close(self) -> None:
            self.closed = True

    def make() -> MappingLoader:
        made.append(Loader())
        return cast(MappingLoader, made[-1])

    kept = KeptLoaders()
    with kept.borrow(("dc1->dc2", "dc2", b"k"), make) as first:
        pass
    with kept.borrow(("dc1->dc2", "dc2", b"k"), make) as again:
        assert again is first
    with kept.borrow(("dc1->dc3", "dc3", b"k"), make) as other:
        assert other is not first
    assert len(made) == 2
    lent, waited = threading.Event(), threading.Event()

    def second_call() -> None:
        with kept.borrow(("dc1->dc2", "dc2", b"k"), make):
            waited.set()

    with kept.borrow(("dc1->dc2", "dc2", b"k"), make):
        lent.set()
        thread = threading.Thread(target=second_call)
        thread.start()
        assert not waited.wait(0.3)  # the second call waits while the first holds it
    thread.join(5)
    assert waited.is_set()
    kept.close()
    assert all(loader.closed for loader in made)
