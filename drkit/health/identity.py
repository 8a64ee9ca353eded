"""One monitor per observer id: the id is a lease in the state store.

Votes are counted per observer id (drkit.health.quorum).  Two monitors started with one
``--observer`` would write one row between them - their views overwrite each other, and a
quorum of two could be one site.  So a monitor claims ``observer:<id>`` before it probes; a
second monitor with the same id is refused, naming the first.  A monitor restarted on the same
host takes its id back at once when the process that held it is gone (same host, pid not
alive); otherwise a claim lapses after its TTL.
"""

from __future__ import annotations

import socket

from drkit.errors import ConfigError, Problem
from drkit.failover.lease import (
    LeaseHeld,
    LeaseKeeper,
    LeaseRepository,
    unique_owner,
)
from drkit.store.db import StateStore

CLAIM_TTL_S = 30.0

# ``drkit status`` probing on its own (no monitor reports) writes what it saw under this
# prefix and its host: one row per host, however often it runs - and never a vote (the
# quorum and automation count monitors only: a CLI probe is one look from one terminal).
CLI_PREFIX = "cli:"


def cli_observer() -> str:
    """The observer id of ``drkit status``'s own probes on this host."""
    return f"{CLI_PREFIX}{socket.gethostname().split('.')[0] or 'host'}"


def is_vote(observer: str) -> bool:
    """Whether ``observer``'s states count in the quorum and for automation (a monitor's)."""
    return not observer.startswith(CLI_PREFIX)


def lease_name(observer: str) -> str:
    return f"observer:{observer}"


def claim_observer(store: StateStore, observer: str, ttl_s: float = CLAIM_TTL_S) -> LeaseKeeper:
    """Claim ``observer`` for this process and keep the claim renewed; ConfigError when another
    live monitor holds it."""
    leases = LeaseRepository(store)
    owner = unique_owner(f"monitor:{observer}")
    name = lease_name(observer)
    try:  # a monitor of this host that ended gives its claim up at once (acquire_from_ended)
        lease = leases.acquire_from_ended(owner, ttl_s, name=name)
    except LeaseHeld as held:
        raise ConfigError(
            [
                Problem(
                    "--observer",
                    f"observer id {observer!r} is in use by another monitor ({held.owner}): "
                    "give each monitor its own --observer, or stop the other one",
                )
            ]
        ) from None
    return LeaseKeeper(leases, lease, ttl_s).start()
