"""Issue 46 (low): urllib copies every header to a redirect's target - the schema registry's
Basic credentials included - whatever host it names. drkit follows a registry's redirect only
within the same origin; another origin never sees the credentials."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from drkit.config.model import SchemaRegistryConfig
from drkit.errors import SchemaRegistryError
from drkit.schemas.registry import SchemaRegistry

PASSWORD = "registry-pw-5c1d"


@contextmanager
def _server(answer: type[http.server.BaseHTTPRequestHandler]) -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_registry_redirect_to_another_origin_is_not_followed_and_gets_no_credentials() -> None:
    seen: list[str | None] = []

    class Elsewhere(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"mode": "READWRITE"}')

        def log_message(self, *_args: object) -> None:
            pass

    with _server(Elsewhere) as other:

        class Redirecting(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(302)
                self.send_header("Location", f"http://127.0.0.1:{other}{self.path}")
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        with _server(Redirecting) as port:
            config = SchemaRegistryConfig.model_validate({
                "url": f"http://127.0.0.1:{port}/apis/ccompat/v7",
                "username": "drkit", "password": PASSWORD,
            })  # fmt: skip
            with pytest.raises(SchemaRegistryError) as refused:
                SchemaRegistry("dc1", config, attempts=1).mode()
    assert "redirected to another origin" in str(refused.value), refused.value
    assert PASSWORD not in str(refused.value)
    assert seen == []  # the other origin was never asked, with or without credentials
