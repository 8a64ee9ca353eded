"""The drill applications' librdkafka lines go through drkit's logging at DEBUG."""

from __future__ import annotations

import logging

import pytest

from drkit.config.model import ClusterConfig
from drkit.kafka.apps import APP_CLIENT_LOG, AppProducer
from drkit.kafka.clients import ClusterEndpoint


def _chatty_producer() -> AppProducer:
    # Nothing listens on port 9: librdkafka logs its connection attempts at level 7.
    config = ClusterConfig(bootstrap_servers="127.0.0.1:9", client_overrides={"log_level": 7})
    return AppProducer(ClusterEndpoint("dc1", config), "orders", transactional=False)


@pytest.mark.parametrize("verbose", [False, True])
def test_application_client_lines_are_debug_and_hidden_unless_verbose(
    verbose: bool, capfd: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    handler = logging.StreamHandler()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    seen: list[logging.LogRecord] = []
    APP_CLIENT_LOG.addHandler(spy := _Spy(seen))
    producer = _chatty_producer()
    try:
        producer._producer.poll(1.0)  # librdkafka hands over its queued log lines here
        producer._producer.poll(0.5)
    finally:
        producer.close()
        APP_CLIENT_LOG.removeHandler(spy)
        root.removeHandler(handler)
        root.setLevel(old_level)
    printed = capfd.readouterr().err  # the file descriptor: librdkafka writes there itself
    assert "%7|" not in printed  # never raw on stderr
    if verbose:
        assert seen, "librdkafka's lines never reached drkit's logging"
        assert {r.levelname for r in seen} == {"DEBUG"}
        assert "127.0.0.1:9" in printed
    else:
        assert not seen and "127.0.0.1:9" not in printed


class _Spy(logging.Handler):
    def __init__(self, seen: list[logging.LogRecord]) -> None:
        super().__init__()
        self.seen = seen

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record)
