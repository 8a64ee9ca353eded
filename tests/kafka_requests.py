"""Which Kafka requests a command made - the proof, without a clock, that a command answered
from its cheap pre-probe (a refused port, a listener that is not Kafka) instead of waiting out
a Kafka client's timeout (issue 51: no wall-clock thresholds in functional tests).

Every request drkit's commands make goes through one of these (drkit.client, the applications'
library, builds its own clients and is not covered): an admin request (``AdminBase._call``, or
``AdminBase._isolated`` for the group requests run in a helper process), or a waiting call of a
consumer or a producer (built by ``drkit.kafka.clients.make_consumer`` / ``make_producer``
from that module's ``Consumer`` / ``Producer``).  Against a cluster that refuses or does not
answer each of them waits its timeout; so "no request made" is what only the fast path
produces.  Building a client sends nothing and is not counted.
"""

from __future__ import annotations

from typing import Any

import pytest

# The calls of a consumer and a producer that wait on a broker (a producer's poll and a
# consumer's assign only serve callbacks or set state).
_WAITS = {
    "consumer": ("consume", "poll", "commit", "committed", "get_watermark_offsets",
                 "list_topics", "offsets_for_times"),
    "producer": ("flush", "list_topics", "init_transactions", "commit_transaction",
                 "abort_transaction", "send_offsets_to_transaction"),
}  # fmt: skip


def record_kafka_requests(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, every Kafka request is appended to the returned list as
    ``"<kind>: <cluster>: <what>"`` - then made as before."""
    from drkit.kafka import admin_base, clients

    made: list[str] = []
    call, isolated = admin_base.AdminBase._call, admin_base.AdminBase._isolated

    def _call(self: Any, context: str, *args: Any, **kwargs: Any) -> Any:
        made.append(f"admin request: {self.endpoint.alias}: {context}")
        return call(self, context, *args, **kwargs)

    def _isolated(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        made.append(f"group request: {self.endpoint.alias}: {method}")
        return isolated(self, method, *args, **kwargs)

    def recording(kind: str, real: Any) -> Any:
        """A subclass of ``real`` noting every call that waits on a broker."""

        def noted(name: str) -> Any:
            method = getattr(real, name)

            def call(self: Any, *args: Any, **kwargs: Any) -> Any:
                made.append(f"{kind}: {self._drkit_bootstrap}: {name}")
                return method(self, *args, **kwargs)

            return call

        def init(self: Any, config: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            self._drkit_bootstrap = config.get("bootstrap.servers")
            real.__init__(self, config, *args, **kwargs)

        waits = _WAITS[kind]
        return type(f"Recorded{real.__name__}", (real,), {
            "__init__": init, **{name: noted(name) for name in waits}
        })  # fmt: skip

    monkeypatch.setattr(admin_base.AdminBase, "_call", _call)
    monkeypatch.setattr(admin_base.AdminBase, "_isolated", _isolated)
    for kind in ("Consumer", "Producer"):  # the names make_consumer / make_producer call
        monkeypatch.setattr(clients, kind, recording(kind.lower(), getattr(clients, kind)))
    return made
