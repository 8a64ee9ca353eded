"""Leader election by a Kafka consumer group: the member assigned partition 0 of a topic leads.

Used so that of all the ``drkit replicate`` processes running one flow (``--workers N``, or one
per host) exactly one runs its checkpoint worker, and another takes over when it dies or hangs:
the group coordinator notices (session timeout) and assigns the partition elsewhere.  Kafka is
the coordinator; drkit adds none.

The member never reads the topic (its partitions are paused as soon as they are assigned); it
only polls to keep its membership.  Leadership can be lost at any poll: callers check
:meth:`GroupElection.leading` before each unit of work.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from confluent_kafka import KafkaException

from drkit.kafka.clients import ClusterEndpoint, make_consumer

log = logging.getLogger(__name__)


class GroupElection:
    """Joins ``group`` on ``endpoint`` subscribed to ``topic`` (which must exist); leads while
    it holds partition 0.  Runs its own polling thread; :meth:`close` leaves the group."""

    def __init__(
        self, endpoint: ClusterEndpoint, group: str, topic: str, member: str, session_s: float = 10
    ) -> None:
        self.endpoint, self.group, self.topic, self.member = endpoint, group, topic, member
        self._leading = threading.Event()
        self._stop = threading.Event()
        self._consumer = make_consumer(
            endpoint,
            group,
            {
                "session.timeout.ms": int(session_s * 1000),
                "heartbeat.interval.ms": int(session_s * 1000 / 5),
                "client.id": f"drkit-election-{member}",
            },
        )
        self._consumer.subscribe(
            [topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
        )
        self._thread = threading.Thread(target=self._poll, daemon=True, name=f"election {group}")
        self._thread.start()

    def leading(self) -> bool:
        """Whether this member leads now (it may stop at any poll)."""
        return self._leading.is_set()

    def wait_leading(self, timeout_s: float) -> bool:
        return self._leading.wait(timeout_s)

    def _assigned(self, consumer: Any, partitions: list[Any]) -> None:
        consumer.pause(partitions)  # membership only: never fetch
        if any(p.partition == 0 for p in partitions):
            self._leading.set()
            log.info("elected", extra={"group": self.group, "member": self.member})

    def _revoked(self, _consumer: Any, partitions: list[Any]) -> None:
        if any(p.partition == 0 for p in partitions) and self._leading.is_set():
            self._leading.clear()
            log.info("no longer elected", extra={"group": self.group, "member": self.member})

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                self._consumer.poll(0.5)
            except KafkaException as err:  # transport trouble: the client retries itself
                log.debug("election poll failed: %s", err)
                self._stop.wait(1.0)
            except RuntimeError:  # closed under us
                return

    def close(self) -> None:
        """Leave the group (bounded: a dead coordinator never holds the caller)."""
        self._leading.clear()
        self._stop.set()
        self._thread.join(5)
        closer = threading.Thread(target=self._consumer.close, daemon=True)
        closer.start()
        closer.join(5)
