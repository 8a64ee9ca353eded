"""A process exits at once even while a group request waits in its admin helper.

Real helper process (drkit.kafka.isolated), real librdkafka client against a port nothing
listens on: the request would wait for its whole deadline; exit must not.
"""

from __future__ import annotations

import threading
import time

from drkit.errors import KafkaError
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.isolated import _close_all, helper_for


def test_exit_kills_a_helper_in_the_middle_of_a_request_without_waiting_for_it() -> None:
    helper = helper_for(ClusterEndpoint.plain("nowhere", "127.0.0.1:1"), 20.0)
    helper.start()
    outcome: list[object] = []

    def request() -> None:
        try:
            outcome.append(helper.call("_direct_group_offsets", "g", timeout_s=20.0))
        except KafkaError as err:
            outcome.append(err)

    caller = threading.Thread(target=request, daemon=True)
    caller.start()
    time.sleep(2.0)  # the request is in flight (the helper holds its lock)
    assert caller.is_alive()
    started = time.monotonic()
    _close_all()
    assert time.monotonic() - started < 3.0
    # The request in flight ended with the helper (it may retry once in a fresh one).
    caller.join(1.5)
    helper.kill()
    caller.join(60.0)
    assert outcome and isinstance(outcome[0], KafkaError)
