"""A stopping process gives up a catch-up under way on a cluster that went away (issue 51).

A checkpoint worker follows the source's ``__consumer_offsets`` with a :class:`TopicTailer`; when
the source died mid-round, that read waited out its own timeouts (10 s for metadata, 30 s to the
end) and held ``drkit replicate``'s SIGTERM up to the service's 15 s wait.  The tailer now takes
its owner's stop event and raises :class:`Stopped` - the stop - instead of a cluster error.

These tests reach for a port nobody listens on (127.0.0.1:1) and one that accepts and never
answers: librdkafka's own waits, no broker needed.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from drkit.config.model import ClusterConfig, CommitSource
from drkit.errors import KafkaError, Stopped
from drkit.kafka.admin import KafkaAdmin
from drkit.kafka.clients import ClusterEndpoint
from drkit.kafka.tailer import TopicTailer
from drkit.offsets.checkpointer import commit_source
from drkit.offsets.commit_follower import CommitFollower
from drkit.topology.internal_topics import OFFSETS_TOPIC


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A listening socket that never answers (a frozen broker: connections hang)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield server.getsockname()[1]


def _stop_soon(stop: threading.Event) -> threading.Timer:
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    return timer


@pytest.mark.parametrize("where", ["refused", "silent"])
def test_a_catch_up_on_a_cluster_gone_raises_stopped_when_the_stop_comes(
    where: str, silent_port: int
) -> None:
    address = "127.0.0.1:1" if where == "refused" else f"127.0.0.1:{silent_port}"
    stop = threading.Event()
    tailer = TopicTailer(
        ClusterEndpoint("dc1", ClusterConfig(bootstrap_servers=address)),
        OFFSETS_TOPIC,
        missing_ok=True,
        start={0: 5},
        stop=stop,
    )
    timer = _stop_soon(stop)
    try:
        # Without the stop event this ran to the metadata timeout and raised a KafkaError.
        with pytest.raises(Stopped):
            list(tailer.catch_up(30.0))
    finally:
        timer.cancel()
        tailer.close()


def test_a_catch_up_begun_after_the_stop_runs_as_any_other() -> None:
    """The checkpoint worker's final round reads the source's log after the stop was set: it
    must run (its checkpoints match the final progress), as the admin's requests begun after
    a stop do - a Stopped here skipped it, and checkpoints went missing (test_accounting)."""
    stop = threading.Event()
    stop.set()
    tailer = TopicTailer(
        ClusterEndpoint("dc1", ClusterConfig(bootstrap_servers="127.0.0.1:1")),
        OFFSETS_TOPIC,
        missing_ok=True,
        start={0: 5},
        stop=stop,
    )
    try:
        with pytest.raises(KafkaError) as raised:
            list(tailer.catch_up(1.0))
        assert not isinstance(raised.value, Stopped)  # the cluster's answer, not the stop
    finally:
        tailer.close()


def test_without_a_stop_event_a_cluster_gone_is_still_a_cluster_error() -> None:
    tailer = TopicTailer(
        ClusterEndpoint("dc1", ClusterConfig(bootstrap_servers="127.0.0.1:1")),
        OFFSETS_TOPIC,
        missing_ok=True,
        start={0: 5},
    )
    try:
        with pytest.raises(KafkaError) as raised:
            list(tailer.catch_up(1.0))
        assert not isinstance(raised.value, Stopped)
    finally:
        tailer.close()


def test_the_checkpoint_workers_commit_follower_reads_the_log_under_its_stop_event() -> None:
    stop = threading.Event()
    source = KafkaAdmin(
        ClusterEndpoint("dc1", ClusterConfig(bootstrap_servers="127.0.0.1:1")), stop=stop
    )
    try:
        follower = commit_source(
            CommitSource.OFFSETS_TOPIC, source, lambda _group: True, tuple, stop=stop
        )
        assert isinstance(follower, CommitFollower)
        tailer = follower._tailer_at({0: 0})
        try:
            assert tailer.stop is stop
        finally:
            tailer.close()
    finally:
        source.close()
