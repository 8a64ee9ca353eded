"""A history of a fault case on real brokers, checked as it happens - not once at the end.

:mod:`tests.invariants` checks the clusters and the store after a case; a window in which the
pointer already sent applications to the target while the source still took their writes is
gone by then.  A :class:`History` samples, while the case runs, what the applications would
see: where the pointer points (the store, plain SQL) and whether the source's topic is fenced
(its ACLs, a plain admin client - none of drkit's adapter), and as many other copies of it as
a case names (``also``: the topic on the other cluster, when applications write it there too).
:meth:`History.violations` then names every sample where the pointer sent the applications to
the target while the source still took their writes; :meth:`History.two_open` every sample
where two watched copies took writes at once.

Sampling is read-only (no probe records), so a case's own accounting of records stays exact.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from sqlalchemy import create_engine, text

from tests.invariants import Cluster, denied_topics


@dataclass(frozen=True)
class Sample:
    at: float  # monotonic seconds since the history started
    pointer: str | None  # the active cluster (None: never set - the source)
    source_fenced: bool  # the source's topic carries its DENY WRITE fence
    open_copies: frozenset[str] = frozenset()  # watched copies without one ("alias:topic")


@dataclass
class History:
    """Samples every ``interval_s`` until stopped (use as a context manager)."""

    store_url: str
    source: Cluster
    topic: str
    interval_s: float = 0.1
    also: tuple[tuple[Cluster, str], ...] = ()  # more copies to watch (cluster, topic)
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> History:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="history", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        engine = create_engine(self.store_url)
        try:
            while not self._stop.is_set():
                try:
                    self.samples.append(self._sample(engine))
                except Exception as err:  # a sample missed is said, never a case's crash
                    self.errors.append(f"{type(err).__name__}: {err}")
                self._stop.wait(self.interval_s)
        finally:
            engine.dispose()

    def _sample(self, engine: object) -> Sample:
        with engine.connect() as connection:  # type: ignore[attr-defined]
            row = connection.execute(
                text("SELECT cluster FROM active_pointer WHERE name = 'default'")
            ).first()
        pointer = str(row[0]) if row is not None else None
        fenced = self.topic in denied_topics(self.source)
        open_copies = {f"{self.source.alias}:{self.topic}"} if not fenced else set()
        for cluster, topic in self.also:
            if topic not in denied_topics(cluster):
                open_copies.add(f"{cluster.alias}:{topic}")
        return Sample(time.monotonic() - self._started, pointer, fenced, frozenset(open_copies))

    def moves(self) -> list[str | None]:
        """The pointer's values in the order they were seen (each once per stretch)."""
        out: list[str | None] = []
        for sample in self.samples:
            if not out or out[-1] != sample.pointer:
                out.append(sample.pointer)
        return out

    def violations(self, target: str) -> list[str]:
        """Every sample at which the pointer sent the applications to ``target`` while the
        source still took the topic's writes: two writable primaries."""
        return [
            f"at {s.at:.2f}s the pointer was on {target} and {self.source.alias} was not fenced"
            for s in self.samples
            if s.pointer == target and not s.source_fenced
        ]

    def two_open(self) -> list[str]:
        """Every sample at which two watched copies took application writes at once."""
        return [
            f"at {s.at:.2f}s {sorted(s.open_copies)} all took writes (pointer: {s.pointer})"
            for s in self.samples
            if len(s.open_copies) > 1
        ]
