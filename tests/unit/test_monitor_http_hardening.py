"""Security review 6, L4: the monitor's HTTP leftovers.

- Beyond loopback, Host was not checked: a DNS-rebinding page could read ``/`` and
  ``/api/status``. Now the status page and the APIs answer only a Host that is an IP address,
  the listen address, this machine's name or one given with ``--allow-host`` (421 otherwise);
  ``/metrics`` and ``/healthz`` answer any (scrapers and probes by whatever name).
- A bearer token was accepted over plain HTTP beyond loopback: refused at start now.
- ``/api/translate`` had no deadline: 504 past it, and its slot stays taken until the
  translation really ends (the bound on work at once holds).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from drkit.cli import cli
from drkit.listening import HostCheck
from drkit.status.web import MAX_TRANSLATIONS, StatusApp


def _hello(_environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello\n"]


def _status_for(app: Any, host: str, path: str = "/api/status") -> str:
    answer: list[str] = []
    environ = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "HTTP_HOST": host}
    b"".join(app(environ, lambda status, _headers: answer.append(status)))
    return answer[0][:3]


def test_beyond_loopback_only_known_host_names_are_answered() -> None:
    checked = HostCheck(_hello, "0.0.0.0", ("drkit.example.com",))
    assert _status_for(checked, "evil.example") == "421"
    assert _status_for(checked, "evil.example:9464") == "421"
    for host in ("10.0.0.7:9464", "[fd00::1]:9464", "drkit.example.com", "DRKIT.example.com:80",
                 socket.gethostname(), "localhost:9464"):  # fmt: skip
        assert _status_for(checked, host) == "200", host
    assert _status_for(checked, "evil.example", "/metrics") == "200"
    assert _status_for(checked, "evil.example", "/healthz") == "200"
    named = HostCheck(_hello, "monitor.internal", ())
    assert _status_for(named, "monitor.internal:9464") == "200"
    assert _status_for(named, "evil.example") == "421"
    # On loopback, as before: loopback names only, every path.
    local = HostCheck(_hello, "127.0.0.1", ())
    assert _status_for(local, "10.0.0.7") == "421"
    assert _status_for(local, "evil.example", "/metrics") == "421"
    assert _status_for(local, "localhost") == "200"


def test_a_token_beyond_loopback_without_tls_is_refused_at_start(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("clusters:\n  dc1: {bootstrap_servers: '127.0.0.1:1'}\n")
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        port = probe.getsockname()[1]
    args = ["--state-dir", str(tmp_path / "s"), "monitor", "--config", str(config),
            "--listen", f"0.0.0.0:{port}", "--api-token-file", str(token)]  # fmt: skip
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 2, done.output
    assert "--api-token-file" in done.output and "--tls-cert" in done.output
    assert "Traceback" not in done.output
    assert not (tmp_path / "s" / "drkit.db").exists()


def _translate(app: StatusApp) -> tuple[str, dict[str, Any]]:
    answer: list[str] = []
    environ = {"PATH_INFO": "/api/translate", "QUERY_STRING": "flow=a->b&offset=t:0:1",
               "REQUEST_METHOD": "GET"}  # fmt: skip
    body = b"".join(app(environ, lambda status, _headers: answer.append(status)))
    return answer[0], json.loads(body)


def test_a_translation_past_its_deadline_is_answered_504_and_keeps_its_slot() -> None:
    release = threading.Event()

    slow_s = 600  # a translation waited for would hold the request this long

    def slow(_flow: str, values: list[str]) -> dict[str, Any]:
        release.wait(slow_s)
        return {"offsets": len(values)}

    app = StatusApp(lambda: None, lambda: None, slow, translate_deadline_s=0.5)  # type: ignore[arg-type,return-value]
    try:
        started = time.monotonic()
        status, document = _translate(app)
        # The deadline's answer (a translation waited for answers 200); the bound is only a
        # hang guard, a tenth of the translation's 600 s (issue 51: not a speed).
        assert status.startswith("504") and "0.5" in document["error"], (status, document)
        assert time.monotonic() - started < slow_s / 10
        for _ in range(MAX_TRANSLATIONS - 1):
            assert _translate(app)[0].startswith("504")
        # Every slot is still taken by a translation under way: refused at once.
        assert _translate(app)[0].startswith("503")
    finally:
        release.set()
    for _ in range(50):
        if app._translations.acquire(blocking=False):
            app._translations.release()
            break
        time.sleep(0.1)
    fast = StatusApp(lambda: None, lambda: None, lambda f, v: {"ok": 1}, translate_deadline_s=5)  # type: ignore[arg-type,return-value]
    assert _translate(fast) == ("200 OK", {"ok": 1})
