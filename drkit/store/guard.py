"""Writes that are conditional on holding a lease (the fencing token on every store write).

A repository given a :class:`WriteGuard` opens its write transactions through it: the guard's
session first proves, inside the same transaction, that its lease token is still the current
one (drkit.failover.lease) and raises otherwise, so a process that lost its lease - frozen past
it, then woken after another took over - changes nothing.  Without a guard the repository writes
unconditionally (the monitor's own bookkeeping, tests).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from sqlalchemy.orm import Session

from drkit.store.db import StateStore


class WriteGuard(Protocol):
    def session(self) -> AbstractContextManager[Session]:
        """A transaction in which the guard's lease is proven held; raises when it is not."""


def write_session(store: StateStore, guard: WriteGuard | None) -> AbstractContextManager[Session]:
    """The transaction a repository writes in: through ``guard`` when there is one."""
    return guard.session() if guard is not None else store.session()
