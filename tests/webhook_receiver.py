"""A real HTTP endpoint that records webhook POSTs (JSON bodies), for notification tests."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


class WebhookReceiver:
    """An HTTP server that answers 500 to the first ``fail_first`` POSTs, then records them."""

    def __init__(self, fail_first: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.attempts = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receiver.attempts += 1
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if receiver.attempts <= fail_first:
                    self.send_response(500)
                else:
                    receiver.bodies.append(json.loads(body))
                    self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook?token=secret"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self) -> list[str]:
        """The ``event`` label of every alert received, in order."""
        return [a["labels"]["event"] for body in self.bodies for a in body["alerts"]]

    def close(self) -> None:
        self.server.shutdown()
