"""Which Kafka requests a command made - the proof, without a clock, that a command answered
from its cheap pre-probe (a refused port, a listener that is not Kafka) instead of waiting out
a Kafka client's timeout (issue 51: no wall-clock thresholds in functional tests).

Every request drkit makes goes through one of these: an admin request (``AdminBase._call``, or
``AdminBase._isolated`` for the group requests run in a helper process), a consumer or a
producer (built by ``drkit.kafka.clients.make_consumer`` / ``make_producer`` from that module's
``Consumer`` / ``Producer``).  Against a cluster that refuses or does not answer each of them
waits its timeout; so "no request made" is what only the fast path produces.  Building an
admin client sends nothing and is not counted.
"""

from __future__ import annotations

from typing import Any

import pytest


def record_kafka_requests(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, every Kafka request (and every consumer or producer built) is appended to
    the returned list as ``"<kind>: <what>"`` - then made as before."""
    from drkit.kafka import admin_base, clients

    made: list[str] = []
    call, isolated = admin_base.AdminBase._call, admin_base.AdminBase._isolated

    def _call(self: Any, context: str, *args: Any, **kwargs: Any) -> Any:
        made.append(f"admin request: {self.endpoint.alias}: {context}")
        return call(self, context, *args, **kwargs)

    def _isolated(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        made.append(f"group request: {self.endpoint.alias}: {method}")
        return isolated(self, method, *args, **kwargs)

    def built(kind: str, real: Any) -> Any:
        def make(config: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            made.append(f"{kind}: {config.get('bootstrap.servers')}")
            return real(config, *args, **kwargs)

        return make

    monkeypatch.setattr(admin_base.AdminBase, "_call", _call)
    monkeypatch.setattr(admin_base.AdminBase, "_isolated", _isolated)
    for kind in ("Consumer", "Producer"):  # the names make_consumer / make_producer call
        monkeypatch.setattr(clients, kind, built(kind.lower(), getattr(clients, kind)))
    return made
