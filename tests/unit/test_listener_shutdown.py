"""Stopping a waitress listener (drkit.listening) while its loop has a wake-up still unread.

``shutdown`` queues the loop's close-everything and then wakes the loop through its trigger;
a wake-up left unread by a request thread can make the loop run it in between, closing the
trigger with the rest.  The unit suite's listener test failed so about once in eight runs
(``OSError: [Errno 9]`` from the trigger's write); here the order is forced.
"""

from __future__ import annotations

import http.client
import os
import threading
import time

from drkit.listening import serve_wsgi


def _hello(_environ: object, start_response: object) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])  # type: ignore[operator]
    return [b"hello"]


def test_a_stop_whose_close_ran_before_its_wake_up_is_a_stop() -> None:
    listener = serve_wsgi(_hello, "127.0.0.1", 0, "--listen")
    connection = http.client.HTTPConnection("127.0.0.1", listener.server_port, timeout=5)
    connection.request("GET", "/")
    assert connection.getresponse().read() == b"hello"
    connection.close()
    trigger = listener.server.trigger
    wake_up = trigger._physical_pull

    def late_wake_up() -> None:
        # An earlier wake-up still unread: the loop runs what was queued before this write.
        os.write(trigger.trigger, b"x")
        deadline = time.monotonic() + 5
        while not trigger._closed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert trigger._closed, "the loop did not run the queued close"
        wake_up()

    trigger._physical_pull = late_wake_up
    listener.shutdown()
    listener.thread.join(5)
    assert not listener.thread.is_alive()
    assert not [t for t in threading.enumerate() if t.name.startswith("waitress-")]
