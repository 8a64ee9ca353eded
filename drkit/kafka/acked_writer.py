"""A long-lived producer whose writes count only once the broker acknowledged them.

``send`` queues a record with an optional *token* (whatever the caller needs to remember about
it); ``confirm`` flushes and returns the tokens of the records the broker acknowledged, and how
many it did not (a delivery error, or still queued at the deadline).  A caller that remembers
"written" only for confirmed tokens never believes a record is on the cluster when it is not:
``flush`` alone returns 0 for a record whose delivery *failed*.  Not thread-safe.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from drkit.errors import KafkaError
from drkit.kafka.clients import ClusterEndpoint, make_producer
from drkit.kafka.errors import translate
from drkit.kafka.io import serve_producer


@dataclass(frozen=True)
class Confirmed:
    """The outcome of one ``confirm``: tokens acknowledged (in delivery order), records not
    acknowledged (failed or still queued), and the first failure's cause."""

    acknowledged: tuple[Hashable, ...]
    unconfirmed: int
    error: str | None

    def raise_unless_all(self, what: str) -> None:
        """KafkaError naming ``what`` when any record went unacknowledged."""
        if self.unconfirmed:
            cause = f": {self.error}" if self.error else ""
            raise KafkaError(f"{self.unconfirmed} {what} not acknowledged{cause}")


class AckedWriter:
    def __init__(self, endpoint: ClusterEndpoint, extra: dict[str, object] | None = None) -> None:
        self.endpoint = endpoint
        self._producer = make_producer(endpoint, extra)
        # Filled by delivery callbacks (inside poll/flush): plain appends only - a call into C
        # there would turn a pending fatal client error into a SystemError.
        self._acked: list[Hashable] = []
        self._failures: list[object] = []

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None = None,
        headers: Sequence[tuple[str, str | bytes | None]] | None = None,
        token: Hashable = None,
    ) -> None:
        """Queue one record; its ``token`` comes back from ``confirm`` once acknowledged."""

        def delivered(error: object, _message: object) -> None:
            if error is None:
                self._acked.append(token)
            else:
                self._failures.append(error)

        header_list = list(headers) if headers else None
        while True:
            try:
                self._producer.produce(
                    topic,
                    value=value,
                    key=key,
                    partition=-1 if partition is None else partition,
                    headers=header_list,
                    on_delivery=delivered,
                )
                return
            except BufferError:  # the local queue is full: serve reports, then retry
                serve_producer(self._producer.poll, 0.05, topic)

    def confirm(self, timeout_s: float, topic: str = "") -> Confirmed:
        """Wait up to ``timeout_s`` for every queued record; what was and was not acknowledged
        since the last ``confirm``."""
        remaining = serve_producer(self._producer.flush, timeout_s, topic)
        acked, failures = tuple(self._acked), list(self._failures)
        self._acked.clear()
        self._failures.clear()
        error = str(translate(failures[0], f"produce to {topic}")) if failures else None
        return Confirmed(acked, len(failures) + remaining, error)
